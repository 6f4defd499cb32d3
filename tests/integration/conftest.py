"""Fixtures: a mesh per test (nats-server, redis-server, the services) and a connected client.

The servers are real: Docker containers (testcontainers: nats:2.11 with JetStream, redis:7) when a Docker engine
answers a ping, else the local binaries; CORRAL_TEST_SERVERS=local|docker forces one. Both paths publish on free
ports of 127.0.0.1 and hand out objects with the same start/stop/close, so tests do not care which one ran
(restarting NATS under the services works on both). Each test gets fresh servers unless its module overrides `mesh` with
one for the module (its tests each using their own ids; `fresh_mesh` serves those that cannot share); only the
choice is per session.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import pytest

from services.client import Client
from services.core.errors import CorralError
from services.local.mesh import SERVICES, Mesh, start_mesh
from services.local.servers import LocalServer, nats_server, redis_server
from services.runtime.bus import Bus
from services.runtime.settings import Settings
from tests.support.cli_runner import RUNNER
from tests.support.servers import ServerPath, choose_servers, nats_container, redis_container

FAST = {
    "CORRAL_LEASE_TTL": "1.5",
    "CORRAL_REQUEST_ACK_WAIT": "2",
    "CORRAL_HEARTBEAT_INTERVAL": "0.2",
    "CORRAL_HEARTBEAT_TIMEOUT": "1.5",
    "CORRAL_NODE_GRACE": "1.0",
    "CORRAL_LOG_LEVEL": "INFO",
}
"""Short timeouts so failover and node death happen within a test's patience."""

LASTING_NODES = {"CORRAL_HEARTBEAT_TIMEOUT": "30", "CORRAL_NODE_GRACE": "30"}
"""Over FAST, for a test not about liveness: its nodes outlive the late heartbeats of a busy machine (a node death
appends events and evicts actors the test counts on)."""

JETSTREAM_TIMEOUT_S = 5.0
"""How long a bus waits for a JetStream answer (`Bus.js`): an outage of a test outlasts the requests it must fail."""


@pytest.fixture(scope="session")
def server_path(pytestconfig: pytest.Config) -> ServerPath:
    """Containers or local binaries, chosen once per session and said once on the terminal."""
    path, reason = choose_servers()
    announce(pytestconfig, f"integration servers: {path} ({reason})")
    return path


def announce(config: pytest.Config, line: str) -> None:
    """Write a line on pytest's terminal, past output capturing."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        print(line)
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(line)


def containers(data_dir: Path) -> tuple[LocalServer, LocalServer]:
    """NATS (JetStream) and Redis in Docker containers, their logs in the data folder."""
    return nats_container(data_dir / "nats"), redis_container(data_dir / "redis")


def start_test_mesh(
    data_dir: Path,
    path: ServerPath,
    services: tuple[str, ...] = SERVICES,
    settings: dict[str, str] | None = None,
    metrics_from: int | None = None,
) -> Mesh:
    """start_mesh with FAST settings (and `settings` over them), its servers on the chosen path (with no
    `services`: the servers alone), its services forked from a parent that imported them once (`preloaded`)."""
    servers = None if path == "local" else containers
    return start_mesh(
        data_dir,
        services=services,
        settings={**FAST, **(settings or {})},
        servers=servers,
        metrics_from=metrics_from,
    )


def configured_servers(config: Path) -> Callable[[Path], tuple[LocalServer, LocalServer]]:
    """`start_mesh`'s `servers`: local processes, nats-server reading the configuration file `config` (a limit a test
    sets, or reloads with SIGHUP)."""

    def servers(data_dir: Path) -> tuple[LocalServer, LocalServer]:
        configured = nats_server(data_dir / "nats")
        configured.command += ["-c", str(config)]
        return configured, redis_server(data_dir / "redis")

    return servers


@contextlib.contextmanager
def running_mesh(data_dir: Path, path: ServerPath, settings: dict[str, str] | None = None) -> Iterator[Mesh]:
    """A mesh of the labels, taints and scheduler processes (`start_test_mesh`), closed on the way out."""
    running = start_test_mesh(data_dir, path, settings=settings)
    try:
        yield running
    finally:
        running.close()


@pytest.fixture
def mesh(tmp_path: Path, server_path: ServerPath) -> Iterator[Mesh]:
    """nats-server and redis-server on free ports, and the labels, taints and scheduler processes (a module whose
    tests each use their own ids overrides it with one mesh for the module)."""
    with running_mesh(tmp_path / "mesh", server_path) as running:
        yield running


@pytest.fixture
def fresh_mesh(tmp_path: Path, server_path: ServerPath) -> Iterator[Mesh]:
    """A mesh of the test's own in a module that shares one: for a test that stops, restarts or reconfigures what
    runs, or asserts what the whole cluster holds."""
    with running_mesh(tmp_path / "fresh" / "mesh", server_path) as running:
        yield running


@pytest.fixture
def servers(request: pytest.FixtureRequest, tmp_path: Path, server_path: ServerPath) -> Iterator[Mesh]:
    """nats-server and redis-server alone: no services yet (`start_service` starts one); the settings of what joins
    them are FAST, with a test's own over them when it parametrizes `servers` indirectly."""
    running = start_test_mesh(tmp_path / "mesh", server_path, services=(), settings=getattr(request, "param", None))
    try:
        yield running
    finally:
        running.close()


@pytest.fixture
async def client(mesh: Mesh, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> AsyncIterator[Client]:
    """A client of the mesh, once every service answers (see `ready_client`); on a mesh its module shares, the
    nodes live at the end are taken out (see `remove_every_node`)."""
    async with ready_client(mesh, monkeypatch) as connected:
        yield connected
        if on_a_shared_mesh(request.node):
            await remove_every_node(connected)


def on_a_shared_mesh(item: pytest.Item) -> bool:
    """Whether the test's `mesh` is one its module shares (an override with a wider scope)."""
    definitions = item._fixtureinfo.name2fixturedefs.get("mesh", ()) if isinstance(item, pytest.Function) else ()
    return bool(definitions) and definitions[-1].scope != "function"


async def remove_every_node(client: Client) -> None:
    """Take out every live node: a node whose client is gone stops heartbeating and dies a moment later, with the
    work the next test on the same mesh may have placed on it meanwhile."""
    for node in await client.nodes():
        await client.remove_node(node.node_id)


@pytest.fixture
async def fresh_client(fresh_mesh: Mesh, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Client]:
    """A client of the test's own mesh (`fresh_mesh`), once every service answers."""
    async with ready_client(fresh_mesh, monkeypatch) as connected:
        yield connected


@contextlib.asynccontextmanager
async def ready_client(mesh: Mesh, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Client]:
    """A client of the mesh once every service answers; it heartbeats the nodes it registers at the mesh's pace
    (its default second would leave half a second of the mesh's 1.5 s timeout to a busy test's loop)."""
    monkeypatch.setenv("CORRAL_HEARTBEAT_INTERVAL", FAST["CORRAL_HEARTBEAT_INTERVAL"])
    async with Client(mesh.nats_url, timeout=10.0) as connected:
        await wait_ready(connected)
        yield connected


READY_TIMEOUT_S = 60.0
"""How long a test waits for a mesh's services to answer: a start is seconds on a quiet machine, many more when the
suite's workers start meshes at once on a busy one (a wait for a condition: it costs nothing when they are quick)."""


async def wait_ready(client: Client) -> None:
    """Wait until labels, taints and the scheduler answer queries (after a start or a restart)."""
    await client.wait_ready(timeout=READY_TIMEOUT_S)


async def holds_within(check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> bool:
    """Whether `check` holds within `timeout` seconds, asked every 50 ms (the services react to a command a
    moment after it returned)."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def log_of(mesh: Mesh, key: str) -> str:
    """What a service process wrote to its log so far."""
    return (mesh.data_dir / f"{key}.log").read_text()


async def corral(mesh: Mesh, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """`corral ARGS` against the mesh in a process of its own (forked from a parent that imported the CLI once:
    `cli_runner`), run without blocking the test's loop: a client's heartbeats go on meanwhile (a loop blocked past
    the heartbeat timeout has its nodes declared dead, and their actors die with them)."""
    argv = [*args, "--nats-url", mesh.nats_url, "--timeout", f"{timeout:g}"]
    return await anyio.to_thread.run_sync(RUNNER.run, argv, timeout + 30)


@contextlib.asynccontextmanager
async def nats_paused(mesh: Mesh) -> AsyncIterator[None]:
    """nats-server stopped (SIGSTOP: connections stay up, nothing answers) from the moment this is entered, going
    on once it is left (what was sent meanwhile is answered then, if still asked)."""
    process: subprocess.Popen[bytes] | None = mesh.nats.process
    if process is None:
        pytest.skip("the NATS server is not a local process here")
    process.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        process.send_signal(signal.SIGCONT)


async def paused(mesh: Mesh, seconds: float) -> None:
    """nats-server stopped for `seconds` (see `nats_paused`), then going on."""
    async with nats_paused(mesh):
        await asyncio.sleep(seconds)


def settings_of(mesh: Mesh) -> Settings:
    """The settings of a service of the mesh run inside the test's process."""
    return Settings.from_env(mesh.env)


@contextlib.asynccontextmanager
async def bus_of(mesh: Mesh, name: str) -> AsyncIterator[Bus]:
    """A bus connected to the mesh's NATS, closed on the way out."""
    connected = await Bus.connect(settings_of(mesh), name)
    try:
        yield connected
    finally:
        await connected.close()


async def scheduler_answers(client: Client) -> bool:
    """Whether the scheduler answers a status query."""
    try:
        await client.status()
    except CorralError:
        return False
    return True


async def cancelled(task: asyncio.Future[None]) -> None:
    """Cancel a service's task run in the test's process, and wait until it has stopped (cleanly)."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, timeout=10.0)
