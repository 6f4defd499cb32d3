"""`corral up` starts again a service that exits (lease lost, log replaced, a crash) at once the first time, and
backs off when it keeps exiting soon after starting, as Kubernetes does a crash-looping container."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from services.local.mesh import FIRST_BACK_OFF_S, LONGEST_BACK_OFF_S, STABLE_S, Mesh
from services.local.servers import LocalServer
from services.runtime.runner import EXIT_LEASE_LOST


class ExitingMesh(Mesh):
    """A mesh whose service processes exit at once asking to be started again (no servers are started)."""

    starts: int = 0
    exit_code = EXIT_LEASE_LOST

    def start_service(self, name: str, instance: str = "") -> subprocess.Popen[bytes]:
        process = subprocess.Popen([sys.executable, "-c", f"raise SystemExit({self.exit_code})"])
        process.wait()
        self.processes[name] = process
        self.kinds[name] = name
        self.started_at[name] = self.clock()
        self.starts += 1
        return process


def mesh_at(tmp_path: Path, now: list[float]) -> ExitingMesh:
    unused = LocalServer("unused", [], 0, tmp_path / "unused.log")
    mesh = ExitingMesh(tmp_path, unused, unused, clock=lambda: now[0])
    mesh.start_service("scheduler")
    return mesh


def test_a_service_that_keeps_exiting_waits_longer_each_time(tmp_path: Path) -> None:
    now = [0.0]
    mesh = mesh_at(tmp_path, now)
    assert mesh.revive() == [f"the scheduler service exited with code {EXIT_LEASE_LOST}; started again"]
    waits = []
    for _ in range(8):
        assert mesh.revive() == []  # it exited again at once: it waits
        waited = 0.0
        while not mesh.revive():
            now[0] += 0.25
            waited += 0.25
        waits.append(waited)
    assert waits[:3] == [FIRST_BACK_OFF_S, 2 * FIRST_BACK_OFF_S, 4 * FIRST_BACK_OFF_S]
    assert waits[-1] == LONGEST_BACK_OFF_S
    assert mesh.starts == 10
    assert mesh.revived[-1].endswith(f"started again after {LONGEST_BACK_OFF_S:g}s (it exits soon after starting)")


def test_a_service_that_ran_a_while_is_started_again_at_once(tmp_path: Path) -> None:
    now = [0.0]
    mesh = mesh_at(tmp_path, now)
    mesh.revive()
    assert mesh.revive() == []
    now[0] += FIRST_BACK_OFF_S
    assert mesh.revive()[0].endswith(f"after {FIRST_BACK_OFF_S:g}s (it exits soon after starting)")
    now[0] += STABLE_S
    assert mesh.revive() == [f"the scheduler service exited with code {EXIT_LEASE_LOST}; started again"]


class CrashingMesh(ExitingMesh):
    """A mesh whose service processes exit at once with code 1 (a crash)."""

    exit_code = 1


def test_a_service_that_crashes_is_started_again_whatever_its_exit_code(tmp_path: Path) -> None:
    unused = LocalServer("unused", [], 0, tmp_path / "unused.log")
    mesh = CrashingMesh(tmp_path, unused, unused, clock=lambda: 0.0)
    mesh.start_service("taints")
    assert mesh.revive() == ["the taints service exited with code 1; started again"]
    assert mesh.starts == 2
