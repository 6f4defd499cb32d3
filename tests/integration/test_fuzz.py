"""Fuzz suite: hostile payloads to every subject a service reads, against one real mesh; then the mesh must be
whole: every service process alive, a new actor still placed through the client, and every service's live
digest equal to a fresh replay of the log at the same sequence.

`make test` sends 25 messages (CORRAL_FUZZ_EXAMPLES; 200 when unset); `make fuzz` sends many more. Examples are not
shrunk: they change the mesh, so a shrunk example would run against another mesh than the one that failed; the
failing example is reported as it was sent, with the service that died and the end of its log.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given

from loadtest.digests import check_digests
from services.client import Client
from services.local.mesh import SERVICES, Mesh
from tests.integration.autoscaling import AUTOSCALER_INTERVAL, write_config
from tests.integration.conftest import start_test_mesh
from tests.integration.fuzzing import Fuzzer, fuzzing
from tests.integration.payloads import Payload, Target, sends
from tests.integration.probe import does_not_place, on_one_mesh
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.integration, pytest.mark.fuzz]

FUZZED_SERVICES = (*SERVICES, "autoscaler")
"""Every service, the autoscaler too (its `local` provider launches nodes for forged pending work alike)."""
EXAMPLES = int(os.environ.get("CORRAL_FUZZ_EXAMPLES", "200"))


@pytest.fixture(scope="module")
def fuzzer(tmp_path_factory: pytest.TempPathFactory, server_path: ServerPath) -> Iterator[Fuzzer]:
    """A mesh for the whole module (starting one costs seconds), and a connection to it."""
    folder = Path(tmp_path_factory.mktemp("fuzz"))
    config = {"CORRAL_AUTOSCALER_CONFIG": str(write_config(folder, idle=1, launch_timeout=2))}
    mesh = start_test_mesh(folder / "mesh", server_path, FUZZED_SERVICES, {**AUTOSCALER_INTERVAL, **config})
    with fuzzing(mesh, _wait_ready) as fuzzer:
        yield fuzzer


async def _wait_ready(mesh: Mesh) -> None:
    async with Client(mesh.nats_url, timeout=10.0) as client:
        await client.wait_ready(timeout=30.0)
        await client.wait_autoscaler(timeout=30.0)


def test_hostile_payloads_on_every_subject_leave_the_mesh_alive_placing_and_replayable(fuzzer: Fuzzer) -> None:
    """Every payload kind to every subject; then alive, still places, live digest == replay digest."""

    @on_one_mesh(EXAMPLES)
    @given(sends)
    def one_message(send: tuple[Target, Payload]) -> None:
        target, payload = send
        fuzzer.send(target, payload)
        fuzzer.assert_alive(f"after message {fuzzer.sent}")

    one_message()
    print(f"{fuzzer.sent} messages sent:", dict(sorted(fuzzer.tally.items())))
    fuzzer.assert_alive(f"after {fuzzer.sent} messages")
    problems = [problem] if (problem := fuzzer.runner.run(does_not_place(fuzzer.mesh))) else []
    checks = fuzzer.runner.run(check_digests(fuzzer.settings, fuzzer.bus, FUZZED_SERVICES, timeout=20.0))
    problems += [f"{check.service}: live digest != replay ({check.detail})" for check in checks if not check.equal]
    assert not problems, f"after {fuzzer.sent} messages: " + "; ".join(problems)
