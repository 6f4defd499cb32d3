"""`corral up` owns its data directory: one at a time, and its snapshots survive a restart."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from schemas import Placed, ScheduleRequest
from schemas import subjects as s
from services.cli.__main__ import main
from services.client import CorralError, SyncClient
from services.local.servers import free_port
from services.runtime.runner import EXIT_LOG_REPLACED
from tests.cli.test_commands import Lines, corral, stop

BACK_WITHIN_S = 2.0
"""How soon `corral up` has a killed server of its own back."""


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    """The `corral up` processes a test starts; any still running at the end is killed."""
    processes: list[subprocess.Popen[str]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()


def _up(data_dir: Path, port: int, started: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    """`corral up` on `data_dir`, once it says it is up (nodes live a minute without heartbeats)."""
    ports = ["--nats-port", str(port), "--http-port", str(free_port())]
    process = subprocess.Popen(
        [sys.executable, "-m", "services.cli", "up", *ports, "--data-dir", str(data_dir)],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "CORRAL_HEARTBEAT_TIMEOUT": "60", "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started.append(process)
    Lines(process).wait_for("Corral is up")
    return process


def test_a_second_corral_up_on_the_same_data_directory_is_refused_naming_the_first(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    data_dir = tmp_path / "corral"
    first = _up(data_dir, free_port(), started)

    second = corral("up", "--nats-port", str(free_port()), "--data-dir", str(data_dir))
    started.append(second)
    _, err = second.communicate(timeout=30)
    assert second.returncode == 1
    assert f"--data-dir {data_dir}: already used by another `corral up` (pid {first.pid}, started " in err
    assert err.count("\n") == 1, err

    assert first.poll() is None, "the first mesh runs on"
    status, _ = stop(first, signal.SIGTERM)
    assert status == 0


def test_a_restarted_corral_up_starts_from_its_snapshots_not_the_whole_log(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    data_dir, port = tmp_path / "corral", free_port()
    url = f"nats://127.0.0.1:{port}"
    first = _up(data_dir, port, started)
    with SyncClient(url) as client:
        client.register_node("n1", {"CPU": 8}, heartbeat=False)
        for index in range(5):
            assert main(["submit", f"a{index}", "--nats-url", url]) == 0
    assert stop(first, signal.SIGTERM)[0] == 0
    saved = re.findall(r"scheduler: snapshot saved at sequence (\d+)", (data_dir / "scheduler.log").read_text())
    assert saved

    second = _up(data_dir, port, started)
    log = (data_dir / "scheduler.log").read_text()
    assert f"scheduler: snapshot at sequence {saved[-1]} loaded" in log
    assert re.findall(r"scheduler: caught up at sequence \d+ \((\d+) events replayed", log)[-1] == "0"
    with SyncClient(url) as client:
        assert sorted(client.placements()) == [f"a{index}" for index in range(5)]
    assert stop(second, signal.SIGTERM)[0] == 0


def test_corral_up_starts_again_the_services_whose_event_log_was_deleted(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    """`nats stream rm CORRAL_EVENTS` under `corral up`: each service exits with code 4, is started again, and
    the mesh serves the new log (the old node is gone; a node registered now takes new work)."""
    data_dir, port = tmp_path / "corral", free_port()
    url = f"nats://127.0.0.1:{port}"
    up = _up(data_dir, port, started)
    with SyncClient(url) as client:
        client.register_node("old", {"CPU": 8}, heartbeat=False)
        assert main(["submit", "a0", "--nats-url", url]) == 0
    asyncio.run(_delete_events_stream(url))
    deadline = time.monotonic() + 60
    with SyncClient(url, timeout=2.0) as client:
        while True:
            with contextlib.suppress(CorralError, TimeoutError):  # a service may be starting again: retry
                if [node.node_id for node in client.nodes()] in ([], ["new"]):  # the old node is gone
                    client.register_node("new", {"CPU": 8}, heartbeat=False)
                    decision = client.submit(ScheduleRequest("a1", {"CPU": 1}))
                    assert isinstance(decision, Placed) and decision.node_id == "new", decision
                    break
            assert time.monotonic() < deadline, "the mesh did not serve the new log within 60s"
            time.sleep(0.25)
    for name in ("labels", "taints", "vclusters", "scheduler"):  # each notices at its next check, and is restarted
        while f"{name}: serving" not in _after_last_rebuild(data_dir / f"{name}.log"):
            assert time.monotonic() < deadline, f"{name} did not serve the new log within 60s"
            time.sleep(0.25)
    status, err = stop(up, signal.SIGTERM)
    assert status == 0
    for name in ("labels", "taints", "vclusters", "scheduler"):
        assert f"the {name} service exited with code {EXIT_LOG_REPLACED}; started again" in err, err


def test_corral_up_starts_again_its_nats_server_and_redis_server_killed_with_sigkill(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    """`kill -9` of either server: within 2 s `corral up` says which and how it ended and has it back on its port
    and data, leaves no zombie, and the mesh still knows its placements and places new work."""
    data_dir, port = tmp_path / "corral", free_port()
    url = f"nats://127.0.0.1:{port}"
    up = _up(data_dir, port, started)
    said = Lines(up, up.stderr)
    with SyncClient(url) as client:
        client.register_node("n1", {"CPU": 8}, heartbeat=False)
        assert isinstance(client.submit(ScheduleRequest("a0", {"CPU": 1})), Placed)

    for server in ("nats-server", "redis-server"):
        (killed,) = [pid for pid, (name, _) in _children(up.pid).items() if name == server]
        os.kill(killed, signal.SIGKILL)
        line = said.wait_for(f"{server} was killed by SIGKILL", timeout=BACK_WITHIN_S)
        assert "started again on port" in line, line
        now = _children(up.pid)
        assert killed not in now, f"{server} {killed} left behind: {now}"
        assert [name for name, state in now.values() if name == server and state != "Z"], now
        assert not [pid for pid, (_, state) in now.items() if state == "Z"], f"zombies: {now}"

    deadline = time.monotonic() + 30
    with SyncClient(url, timeout=2.0) as client:
        while True:
            with contextlib.suppress(CorralError, TimeoutError):  # the services may still be reconnecting
                assert "a0" in client.placements()
                assert isinstance(client.submit(ScheduleRequest("a1", {"CPU": 1})), Placed)
                break
            assert time.monotonic() < deadline, "the mesh did not place new work within 30s of the restarts"
            time.sleep(0.25)
    for name in ("labels", "taints", "vclusters", "scheduler"):  # one line per outage, not one per reconnect attempt
        assert (data_dir / f"{name}.log").read_text().count("Connect call failed") <= 1, name
    assert stop(up, signal.SIGTERM)[0] == 0


def test_commands_find_the_mesh_of_corral_up_in_its_endpoints_file(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    """Run where `corral up` runs (its data directory `./.corral/`), with no URL given: `why --at` and `why-placed`
    read the scheduler's snapshot from the mesh's Redis, and `config view` says where each value came from."""
    port = free_port()
    up = _up(tmp_path / ".corral", port, started)
    url = f"nats://127.0.0.1:{port}"
    with SyncClient(url) as client:
        client.register_node("n1", {"CPU": 8}, heartbeat=False)
        assert isinstance(client.submit(ScheduleRequest("a0", {"CPU": 1})), Placed)
        placed_at = client.status().sequence
    env = {key: value for key, value in os.environ.items() if key not in ("CORRAL_NATS_URL", "CORRAL_REDIS_URL")}
    env.pop("CORRAL_DATA_DIR", None)

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "services.cli", *argv]
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)

    for argv in (("why", "a0", "--at", str(placed_at)), ("why-placed", "a0")):
        done = run(*argv)
        assert done.returncode == 0, done.stderr
        assert done.stderr == "", done.stderr  # no "snapshot store unreachable (... 127.0.0.1:6379)"
        assert "n1" in done.stdout, done.stdout
    view = run("config", "view")
    assert view.returncode == 0 and view.stderr == "", view.stderr
    redis = re.search(r"redis-url +(redis://127\.0\.0\.1:\d+/0) +endpoints file \.corral/endpoints\.json", view.stdout)
    assert redis and not redis[1].endswith(":6379/0"), view.stdout
    assert re.search(rf"nats-url +{url} +endpoints file \.corral/endpoints\.json", view.stdout), view.stdout

    assert stop(up, signal.SIGTERM)[0] == 0
    assert not (tmp_path / ".corral" / "endpoints.json").exists()


def _children(parent: int) -> dict[int, tuple[str, str]]:
    """The child processes of `parent`: pid -> (command name, state; `Z` a zombie), read from /proc."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):  # a process that ended meanwhile
            head, _, rest = stat.read_text().rpartition(")")
            state, ppid = rest.split()[:2]
            if int(ppid) == parent:
                found[int(stat.parent.name)] = (head.partition("(")[2], state)
    return found


def _after_last_rebuild(log: Path) -> str:
    """What a service logged after it last said it must rebuild its view from a new log ("" before it said so)."""
    text = log.read_text()
    said = text.rfind("rebuild the view from the new log")
    return "" if said < 0 else text[said:]


async def _delete_events_stream(url: str) -> None:
    connection = await nats.connect(url)
    try:
        await connection.jetstream().delete_stream(s.EVENTS_STREAM)
    finally:
        await connection.close()
