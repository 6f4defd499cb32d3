"""How the tests get their servers: the local binaries, or the same servers as Docker containers (testcontainers)
published on free ports of 127.0.0.1 when a Docker engine answers; `choose_servers` says which a test session uses.

Test tooling: only tests/ import it; no service and no CLI module does (tests/test_layout.py checks).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from services.local.servers import LocalServer, ServerError, free_port

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer


SERVERS_ENV = "CORRAL_TEST_SERVERS"
"""`local` or `docker` forces how the integration tests get their servers; unset (or `auto`) asks the engine."""

ServerPath = Literal["local", "docker"]

NATS_IMAGE = "nats:2.11"
REDIS_IMAGE = "redis:7"
NATS_PORT = 4222
REDIS_PORT = 6379
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


def docker_engine_answers(timeout: float = 2.0) -> bool:
    """Whether a Docker engine answers a ping, at the host testcontainers would use; never raises.

    A `docker` binary on PATH says nothing (the CLI is often there without an engine), so this asks the engine.
    """
    try:
        import docker  # type: ignore[import-untyped]  # noqa: PLC0415 (slow import, only when asked)
        from testcontainers.core.docker_client import get_docker_host  # noqa: PLC0415

        host = get_docker_host()
        environment = {**os.environ, "DOCKER_HOST": host} if host else dict(os.environ)
        ssh = bool(host and host.startswith("ssh://"))
        client = docker.from_env(timeout=timeout, environment=environment, use_ssh_client=ssh)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # no engine, a closed port, a refused socket, bad TLS settings: all mean "no"
        return False


def choose_servers(
    environ: Mapping[str, str] | None = None,
    ping: Callable[[], bool] = docker_engine_answers,
    missing: Callable[[], list[str]] | None = None,
) -> tuple[ServerPath, str]:
    """`docker` when the engine answers and holds (or can pull) the images (or CORRAL_TEST_SERVERS=docker), else
    `local`; and why, for the log."""
    wanted = (os.environ if environ is None else environ).get(SERVERS_ENV, "").strip().lower()
    if wanted == "local":
        return "local", f"{SERVERS_ENV}=local"
    if wanted == "docker":
        if not ping():
            raise ServerError(f"{SERVERS_ENV}=docker, but no Docker engine answers a ping (check DOCKER_HOST)")
        return "docker", f"{SERVERS_ENV}=docker"
    if wanted not in {"", "auto"}:
        raise ServerError(f"{SERVERS_ENV}={wanted!r}: use local, docker or auto")
    if not ping():
        return "local", "no Docker engine answered a ping"
    absent = (missing or images_missing)()
    if absent:
        return "local", f"a Docker engine answered a ping, but it has no {' or '.join(absent)} and could not pull it"
    return "docker", "a Docker engine answered a ping"


def images_missing(images: tuple[str, ...] = (NATS_IMAGE, REDIS_IMAGE), pull_timeout: float = 30.0) -> list[str]:
    """The images the engine neither holds nor could pull within `pull_timeout` seconds (an engine with no registry
    in reach: the tests then use the local binaries instead of failing on every container); never raises."""
    try:
        import docker  # noqa: PLC0415 (slow import, only when asked)

        client = docker.from_env(timeout=pull_timeout)
    except Exception:  # the engine went away since the ping
        return list(images)
    missing = []
    try:
        for image in images:
            try:
                client.images.get(image)
            except Exception:  # not held: pull it, within the timeout
                try:
                    client.images.pull(image)
                except Exception:  # no registry, a timeout, a refused pull
                    missing.append(image)
    finally:
        client.close()
    return missing


def wait_for_log(
    name: str,
    pattern: str,
    count: int,
    logs: Callable[[], bytes],
    running: Callable[[], bool],
    timeout: float = 60.0,
) -> None:
    """Wait until `logs()` holds `pattern` `count` times: the start number `count` is ready.

    testcontainers' LogMessageWaitStrategy returns at the first match, so after a restart it would see the
    line of the previous start; counting does not.
    """
    regex = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while True:
        if len(regex.findall(logs().decode(errors="replace"))) >= count:
            return
        if not running():
            raise ServerError(f"{name} stopped before logging {pattern!r} (start {count})")
        if time.monotonic() > deadline:
            raise ServerError(f"{name} did not log {pattern!r} (start {count}) within {timeout}s")
        time.sleep(0.1)


@dataclass
class ContainerServer(LocalServer):
    """A server in a Docker container, published on `port` of 127.0.0.1: the operations of a LocalServer.

    `start()` creates and starts the container, or starts it again after `stop()` (`docker stop`: SIGTERM,
    then SIGKILL after 5 s). The host port is bound explicitly, so it stays the same across a restart, and the
    container's filesystem (the JetStream store) survives it: a test may restart NATS under the services on
    either path. `close()` keeps the container's log in `log_path` and removes the container.
    """

    container: DockerContainer = field(kw_only=True, repr=False)
    ready_log: str = field(kw_only=True)
    starts: int = field(default=0, init=False)
    closed: bool = field(default=False, init=False)

    def start(self) -> ContainerServer:
        """Start (or start again) and wait until the server logs that it is ready."""
        if self.closed:
            raise ServerError(f"{self.name} was closed; make a new one")
        if self.starts == 0:
            self.container.start()
            host = self.container.get_container_host_ip()
            if host not in LOOPBACK:
                self.close()
                raise ServerError(
                    f"{self.name}: the Docker engine publishes ports on {host}, but the mesh addresses its servers "
                    f"at 127.0.0.1; set {SERVERS_ENV}=local"
                )
        else:
            self.container.get_wrapped_container().start()
        self.starts += 1
        wrapped = self.container.get_wrapped_container()

        def logs() -> bytes:
            return bytes(wrapped.logs())

        def running() -> bool:
            wrapped.reload()
            return bool(wrapped.status in {"created", "running"})

        wait_for_log(self.name, self.ready_log, self.starts, logs, running)
        return self

    def stop(self) -> None:
        """Stop gracefully (SIGTERM, then SIGKILL after 5 s); the container stays, to start again."""
        if self.starts and not self.closed:
            self.container.get_wrapped_container().stop(timeout=5)

    def close(self) -> None:
        """Keep the container's log in `log_path`, then remove the container."""
        if self.closed:
            return
        self.closed = True
        if self.starts:
            with contextlib.suppress(Exception):
                self.log_path.write_bytes(bytes(self.container.get_wrapped_container().logs()))
        self.container.stop()


def nats_container(data_dir: Path, port: int | None = None) -> ContainerServer:
    """nats-server with JetStream (image nats:2.11, as in deploy/compose.yaml) storing inside the container;
    `data_dir` gets its log."""
    from testcontainers.core.container import DockerContainer  # noqa: PLC0415 (needs an engine)

    port = port or free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    command = ["-js", "-sd", "/data/jetstream", "-p", str(NATS_PORT)]
    container = DockerContainer(NATS_IMAGE).with_command(command).with_bind_ports(NATS_PORT, port)
    return ContainerServer(
        f"nats-server ({NATS_IMAGE})",
        command,
        port,
        data_dir / "nats-server.log",
        container=container,
        ready_log=r"Server is ready",
    )


def redis_container(data_dir: Path, port: int | None = None, *, durable: bool = False) -> ContainerServer:
    """redis-server (image redis:7), throwaway unless `durable`; `data_dir` gets its log."""
    from testcontainers.community.redis import RedisContainer  # noqa: PLC0415 (needs an engine)

    port = port or free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    persistence = ["--appendonly", "yes", "--appendfsync", "everysec"] if durable else ["--appendonly", "no"]
    command = ["redis-server", "--port", str(REDIS_PORT), "--save", "", *persistence]
    container = RedisContainer(REDIS_IMAGE, port=REDIS_PORT).with_command(command).with_bind_ports(REDIS_PORT, port)
    return ContainerServer(
        f"redis-server ({REDIS_IMAGE})",
        command,
        port,
        data_dir / "redis-server.log",
        container=container,
        ready_log=r"Ready to accept connections",
    )
