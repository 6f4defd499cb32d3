"""`corral up`'s watch over its servers: a server that exits is started again, one that keeps exiting is given up."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.cli.common import CliError
from services.cli.supervisor import RESTART_WINDOW_S, SERVER_RESTARTS, ServerWatch, how_it_ended
from services.local.servers import LocalServer, redis_server


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[LocalServer]:
    """A running redis-server, stopped at the end."""
    server = redis_server(tmp_path / "redis").start()
    yield server
    server.stop()


def killed(server: LocalServer) -> None:
    """`kill -9` the server and wait until it is gone."""
    assert server.process is not None
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(timeout=10)


def test_how_a_process_ended_names_the_signal_or_the_code() -> None:
    assert how_it_ended(-9) == "was killed by SIGKILL"
    assert how_it_ended(2) == "exited with code 2"
    assert how_it_ended(-200) == "was killed by signal 200"


@pytest.mark.integration
def test_a_killed_server_is_started_again_until_it_keeps_exiting(redis: LocalServer) -> None:
    now = [0.0]
    watch = ServerWatch((redis,), clock=lambda: now[0])
    assert watch.check() == []
    for _ in range(SERVER_RESTARTS):
        killed(redis)
        (line,) = watch.check()
        assert line.startswith("redis-server was killed by SIGKILL (last logged: ")
        assert line.endswith(f"; started again on port {redis.port}")
        now[0] += 1.0
    killed(redis)
    with pytest.raises(CliError, match=f"exited {SERVER_RESTARTS + 1} times within {RESTART_WINDOW_S:g}s"):
        watch.check()


@pytest.mark.integration
def test_exits_further_apart_than_the_window_are_forgiven(redis: LocalServer) -> None:
    now = [0.0]
    watch = ServerWatch((redis,), clock=lambda: now[0])
    for _ in range(SERVER_RESTARTS + 2):
        killed(redis)
        assert len(watch.check()) == 1
        now[0] += RESTART_WINDOW_S
