"""`corral up`'s watch over its own nats-server and redis-server: an exit is noticed, said with why (how it ended,
the last line of its log), and the server is started again on its port and data, or, after repeated failures, the
mesh is given up."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from services.cli.common import CliError
from services.local.servers import LocalServer, ServerError

SERVER_RESTARTS = 3
"""How many times a server is started again within `RESTART_WINDOW_S` before `corral up` gives up."""
RESTART_WINDOW_S = 60.0
"""The window `SERVER_RESTARTS` counts in."""


def how_it_ended(code: int) -> str:
    """`exited with code 1`, or `was killed by SIGKILL` for a process ended by a signal (a negative code)."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def last_line(path: Path, limit: int = 4096) -> str:
    """The last non-empty line among a file's last `limit` bytes, at most 300 characters ("" when none)."""
    try:
        with path.open("rb") as file:
            file.seek(max(0, file.seek(0, 2) - limit))
            tail = file.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def server_report(server: LocalServer, code: int) -> str:
    """`nats-server was killed by SIGKILL (last logged: ...; its log: ...)`."""
    last = last_line(server.log_path)
    return f"{server.name} {how_it_ended(code)} ({f'last logged: {last}; ' if last else ''}its log: {server.log_path})"


def exited_server(servers: tuple[LocalServer, ...]) -> str | None:
    """A report on the first of `servers` whose process has exited (it is reaped: no zombie), if any."""
    for server in servers:
        code = server.process.poll() if server.process is not None else None
        if code is not None:
            return server_report(server, code)
    return None


@dataclass
class ServerWatch:
    """Starts again, on the same port and data directory, a server that exited; gives up on one that fails to start
    or exits more than `SERVER_RESTARTS` times within `RESTART_WINDOW_S`."""

    servers: tuple[LocalServer, ...]
    clock: Callable[[], float] = time.monotonic
    restarts: dict[str, list[float]] = field(default_factory=dict)
    """Server name -> when (by `clock`) it was started again, within the window."""

    def check(self) -> list[str]:
        """A line for each server that exited and was started again (blocks while it starts); `CliError` naming the
        server, how it ended and why, when it is given up."""
        lines = []
        for server in self.servers:
            code = server.process.poll() if server.process is not None else None
            if code is None:
                continue
            report = server_report(server, code)
            now = self.clock()
            recent = [at for at in self.restarts.get(server.name, []) if now - at < RESTART_WINDOW_S]
            if len(recent) >= SERVER_RESTARTS:
                raise CliError(
                    f"{report}; it exited {len(recent) + 1} times within {RESTART_WINDOW_S:g}s: stopping the mesh"
                )
            try:
                server.start()
            except ServerError as error:
                raise CliError(f"{report}; starting it again failed ({error}): stopping the mesh") from None
            self.restarts[server.name] = [*recent, now]
            lines.append(f"{report}; started again on port {server.port}")
        return lines
