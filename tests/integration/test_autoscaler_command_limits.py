"""The `command` provider's commands cannot wedge the autoscaler: a command that hangs (leaving a grandchild that
holds its output) is killed with everything it started at the timeout while rounds go on and a healthy type
launches; a command that prints hundreds of megabytes leaves the autoscaler's memory bounded and a bounded,
escaped note in `NodeLaunchFailed`, the log and `corral autoscaler status`."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from schemas import NodeLaunchFailed, ScheduleRequest
from services.autoscaler.output import KEPT_BYTES
from services.local.mesh import Mesh
from tests.integration.autoscaling import autoscaled_mesh, events_of, launch_requests, node_agents, write_config
from tests.integration.conftest import corral, holds_within, log_of
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

SCRIPTS = Path(__file__).parent / "scripts"
HANGS = """
if [ "$CORRAL_NODE_TYPE" = cpu-4 ]; then
  sleep 1000 &
  echo $! > "$NODES_DIR/$CORRAL_LAUNCH_ID.{what}.pid"
  sleep 1000
fi
exec {python} {script}
"""
"""A command that hangs for cpu-4 (its background grandchild holds the output pipe), and otherwise runs `script`."""


def hanging_provider(folder: Path) -> str:
    """The provider line: launch and terminate both hang for cpu-4, and start or stop `corral node start` else."""
    for what, script in (("launch", "launch_node.py"), ("terminate", "terminate_node.py")):
        text = HANGS.format(what=what, python=sys.executable, script=SCRIPTS / script)
        (folder / f"{what}.sh").write_text(text)
    return f"{{type: command, launch: 'sh {folder / 'launch.sh'}', terminate: 'sh {folder / 'terminate.sh'}'}}"


def running(pid_file: Path) -> bool:
    """Whether the process whose pid the file holds still runs (a zombie waiting to be reaped does not)."""
    stat = Path(f"/proc/{int(pid_file.read_text())}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def launched_for(mesh: Mesh, work_id: str) -> bool:
    """Whether the log asks for a launch for `work_id`."""
    return any(work_id in request.work for request in launch_requests(await events_of(mesh)))


async def test_a_hanging_command_is_killed_whole_at_its_timeout_while_rounds_go_on_and_a_healthy_type_launches(
    tmp_path: Path, server_path: ServerPath
) -> None:
    config = write_config(tmp_path, provider=hanging_provider(tmp_path), launch_timeout=10)
    with node_agents(tmp_path / "nodes") as nodes:
        async with autoscaled_mesh(tmp_path / "mesh", server_path, config, {"NODES_DIR": str(nodes)}) as (mesh, client):
            await client.submit(ScheduleRequest("stuck", {"CPU": 1}, label_selector={"type": "4c8g"}))
            launch_pid = nodes / "L1.launch.pid"
            assert await holds_within(_exists(launch_pid), timeout=10.0), "the cpu-4 launch command never ran"
            await client.submit(ScheduleRequest("healthy", {"CPU": 1}, label_selector={"type": "16c32g"}))
            assert str((await client.wait_placed("healthy", timeout=30.0)).node_id).startswith("cpu-16-")

            async def launch_killed() -> bool:
                return not running(launch_pid)

            started = time.monotonic()
            assert await holds_within(launch_killed, timeout=30.0), "the launch command's grandchild outlived it"
            print(f"hanging launch's grandchild gone {time.monotonic() - started:.1f} s after the healthy node's work")
            failure = await _first_failure(mesh, timeout=10.0)
            assert failure.launch_id == "L1"

            async def backed_off() -> bool:  # for launch_timeout_s: checked before it ends
                cpu4 = next(t for t in (await client.autoscaler_status()).node_types if t.name == "cpu-4")
                return cpu4.backed_off_until > failure.failed_at

            assert await holds_within(backed_off, timeout=5.0)

            terminate_pid = nodes / "L1.terminate.pid"  # the failed launch's terminate command hangs too
            assert await holds_within(_exists(terminate_pid), timeout=10.0), "the failed launch was never terminated"
            await client.submit(ScheduleRequest("another", {"CPU": 16}, label_selector={"type": "16c32g"}))
            assert await holds_within(lambda: launched_for(mesh, "another"), timeout=8.0)
            assert running(terminate_pid), "the launch was asked for only once the terminate command was killed"
            assert str((await client.wait_placed("another", timeout=30.0)).node_id).startswith("cpu-16-")

            async def terminate_killed() -> bool:
                return not running(terminate_pid)

            assert await holds_within(terminate_killed, timeout=30.0), "the terminate command's grandchild outlived it"

            async def said_so() -> bool:  # logged once the command is killed
                return "did not finish within 10s" in log_of(mesh, "autoscaler")

            assert await holds_within(said_so, timeout=10.0)


def _exists(path: Path) -> Callable[[], Awaitable[bool]]:
    """Whether `path` holds something (a pid written)."""

    async def exists() -> bool:
        return path.exists() and bool(path.read_text().strip())

    return exists


CHATTY = r"""printf 'start\033[31m\n'; head -c {size} /dev/zero; printf '\nthe end \342\200\256\n'; exit 1"""
CHATTY_BYTES = 300_000_000
PRINTED = len(b"start\x1b[31m\n") + CHATTY_BYTES + len("\nthe end \u202e\n".encode())


async def test_a_chatty_command_leaves_bounded_memory_and_a_bounded_escaped_note(
    tmp_path: Path, server_path: ServerPath
) -> None:
    (tmp_path / "chatty.sh").write_text(CHATTY.format(size=CHATTY_BYTES))
    provider = f"{{type: command, launch: 'sh {tmp_path / 'chatty.sh'}', terminate: 'true'}}"
    config = write_config(tmp_path, provider=provider, launch_timeout=120)
    async with autoscaled_mesh(tmp_path / "mesh", server_path, config) as (mesh, client):
        await client.submit(ScheduleRequest("job", {"CPU": 1}))
        failure = await _first_failure(mesh, timeout=120.0)
        peak = _peak_rss_mib(mesh)
        print(f"autoscaler peak RSS {peak:.0f} MiB after {PRINTED / 1e6:.0f} MB of output; note: {len(failure.reason)}")
        assert peak < 200, f"the autoscaler held {peak:.0f} MiB for the command's output"
        reason = failure.reason
        assert reason.startswith("the launch command exited with code 1: start\\x1b[31m\\x0a\\x00\\x00"), reason[:80]
        assert reason.endswith("\\x00\\x00\\x0athe end \\u202e"), reason[-80:]
        assert re.findall(r" \.\.\. (\d+) bytes elided \.\.\. ", reason) == [str(PRINTED - 2 * KEPT_BYTES)]
        assert len(reason) < 10_000 and reason.isprintable()
        status = await corral(mesh, "autoscaler", "status")
        assert status.returncode == 0, status.stderr
        assert "the end \\u202e" in status.stdout and "bytes elided" in status.stdout
        for raw in ("\x00", "\x1b", "\u202e"):
            assert raw not in status.stdout and raw not in log_of(mesh, "autoscaler")


async def _first_failure(mesh: Mesh, timeout: float) -> NodeLaunchFailed:
    async def failed() -> bool:
        return any(isinstance(event, NodeLaunchFailed) for event in await events_of(mesh))

    assert await holds_within(failed, timeout=timeout), "no launch failed"
    return next(event for event in await events_of(mesh) if isinstance(event, NodeLaunchFailed))


def _peak_rss_mib(mesh: Mesh) -> float:
    """The autoscaler process's peak resident memory so far, in MiB."""
    status = Path(f"/proc/{mesh.processes['autoscaler'].pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024
