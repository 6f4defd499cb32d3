"""Many event-stream clients of the gateway leave the bus and the API alone: 300 streams of a 30,000-event log share
one reader (the stream allows fewer consumers than there are clients), the API answers fast, every service can
restart, the gateway's memory stays small, past the cap the gateway answers 503 with Retry-After, and a client
that stops reading is dropped and resumes with Last-Event-ID, losing and repeating nothing; a service started while
the log has no room for its consumer waits for room instead of exiting."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import statistics
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import nats
import nats.js.errors
import pytest
from nats.js import JetStreamContext, api

from schemas import subjects as s
from services.client import Client
from services.local.mesh import SERVICES, Mesh
from services.local.servers import free_port
from services.runtime.connection import CONSUMER_LIMIT as CONSUMER_LIMIT_CODE
from services.runtime.connection import STREAMS
from tests.integration.conftest import holds_within, log_of, start_test_mesh
from tests.integration.gateway import TOKEN, http_base, wait_ready
from tests.integration.watchers import Watcher, open_watcher, registered, relabels, write_events
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

LOGGED = 30_000
"""The events in the log before the streams open."""
WATCHERS = 300
"""The streams opened at once; also the gateway's cap."""
CONSUMER_LIMIT = 40
"""The event stream's consumers, well under the streams opened: a consumer per stream would run out."""
READING = 10
"""Of the streams, those that read the whole log to its end (the others stop after the first bytes)."""
NODE = "w1"


async def events_stream_with_a_consumer_limit(nats_url: str) -> None:
    """The event stream made before any service, as the services would make it but with `CONSUMER_LIMIT`."""
    nc = await nats.connect(nats_url)
    try:
        (config,) = [config for config in STREAMS if config.name == s.EVENTS_STREAM]
        await nc.jetstream().add_stream(dataclasses.replace(config, max_consumers=CONSUMER_LIMIT))
    finally:
        await nc.close()


@contextlib.contextmanager
def watched_mesh(data_dir: Path, server_path: ServerPath, logged: int) -> Iterator[Mesh]:
    """The services and the gateway (capped at `WATCHERS` streams) on a log of `logged` events whose stream allows
    `CONSUMER_LIMIT` consumers."""
    settings = {
        "CORRAL_HTTP_PORT": str(free_port()),
        "CORRAL_HTTP_TOKEN": TOKEN,
        "CORRAL_HEARTBEAT_TIMEOUT": "60",
        "CORRAL_HTTP_MAX_WATCHERS": str(WATCHERS),
    }
    running = start_test_mesh(data_dir, server_path, services=(), settings=settings)
    try:
        asyncio.run(events_stream_with_a_consumer_limit(running.nats_url))
        asyncio.run(write_events(running.nats_url, [registered(NODE)]))
        asyncio.run(write_events(running.nats_url, relabels(NODE, logged - 1)))
        for service in (*SERVICES, "gateway"):
            running.start_service(service)
        wait_ready(http_base(running), timeout=60)
        yield running
    finally:
        running.close()


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory, server_path: ServerPath) -> Iterator[Mesh]:
    """`watched_mesh` on a log of `LOGGED` events, for the module's tests of size."""
    with watched_mesh(tmp_path_factory.mktemp("watchers") / "mesh", server_path, LOGGED) as running:
        yield running


@pytest.fixture
def small_mesh(tmp_path: Path, server_path: ServerPath) -> Iterator[Mesh]:
    """`watched_mesh` on a log of a few events."""
    with watched_mesh(tmp_path / "mesh", server_path, 10) as running:
        yield running


@pytest.fixture
async def client(mesh: Mesh) -> AsyncIterator[Client]:
    async with Client(mesh.nats_url, timeout=10.0) as connected:
        yield connected


def port_of(mesh: Mesh) -> int:
    return int(mesh.settings["CORRAL_HTTP_PORT"])


def gateway_rss_mb(mesh: Mesh) -> float:
    """The gateway process's resident memory (VmRSS), in MB."""
    status = Path(f"/proc/{mesh.processes['gateway'].pid}/status").read_text()
    (line,) = [line for line in status.splitlines() if line.startswith("VmRSS:")]
    return int(line.split()[1]) / 1024


async def consumers_of_the_log(nats_url: str) -> int:
    nc = await nats.connect(nats_url)
    try:
        return int((await nc.jetstream().stream_info(s.EVENTS_STREAM)).state.consumer_count)
    finally:
        await nc.close()


async def latencies_ms(http: httpx.AsyncClient, path: str, times: int) -> list[float]:
    taken = []
    for _ in range(times):
        started = time.perf_counter()
        answer = await http.get(path)
        taken.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])
    return taken


@pytest.mark.scale
async def test_three_hundred_streams_of_a_long_log_share_one_reader_and_leave_the_api_and_the_bus_alone(
    mesh: Mesh, client: Client
) -> None:
    port = port_of(mesh)
    last = await client.bus.last_sequence()
    assert last >= LOGGED
    watchers: list[Watcher] = []
    try:
        for batch in range(0, WATCHERS, 50):
            watchers += await asyncio.gather(*(open_watcher(port, receive_buffer=8192) for _ in range(50)))
            assert [watcher.status for watcher in watchers] == [200] * len(watchers), batch
        refused = await open_watcher(port)
        assert refused.status == 503 and refused.headers["retry-after"].isdigit(), refused.headers
        assert "CORRAL_HTTP_MAX_WATCHERS" in (await refused.read_to_end(10)).decode()

        live = relabels(NODE, 2000, first=LOGGED)
        appending = asyncio.create_task(write_events(mesh.nats_url, live, at_once=200))
        reading = [asyncio.create_task(watcher.read_until(last + len(live), 120)) for watcher in watchers[:READING]]
        async with httpx.AsyncClient(base_url=http_base(mesh), timeout=15.0) as http:
            ready = await latencies_ms(http, "/readyz", 3)
            nodes = await latencies_ms(http, "/api/v1/nodes", 15)
        print(f"\n/readyz {[round(ms) for ms in ready]} ms; /api/v1/nodes {[round(ms) for ms in nodes]} ms")
        print(f"/api/v1/nodes median {statistics.median(nodes):.0f} ms with {WATCHERS} open streams")
        assert statistics.median(nodes) < 200

        consumers = await consumers_of_the_log(mesh.nats_url)
        print(f"consumers of the event log with {WATCHERS} open streams: {consumers}")
        assert consumers < CONSUMER_LIMIT // 2

        mesh.stop_service("taints")
        mesh.start_service("taints")
        await client.wait_ready(timeout=30)
        assert await client.taints(limit=1) is not None
        assert mesh.processes["taints"].poll() is None

        await appending
        for task in reading:
            ids = await task  # the services append too meanwhile
            assert ids == list(range(1, len(ids) + 1)) and len(ids) >= last + len(live), (ids[:3], ids[-3:])
        rss = gateway_rss_mb(mesh)
        print(f"gateway RSS with {WATCHERS} open streams, {WATCHERS - READING} of them not reading: {rss:.0f} MB")
        assert rss < 150
    finally:
        for watcher in watchers:
            watcher.close()


@pytest.mark.scale
async def test_a_client_that_stops_reading_is_dropped_and_resumes_with_last_event_id_losing_nothing(
    mesh: Mesh, client: Client
) -> None:
    port = port_of(mesh)
    start = await client.bus.last_sequence() + 1
    stalled = await open_watcher(port, f"?since={start}", receive_buffer=4096)
    assert stalled.status == 200
    said = log_of(mesh, "gateway").count("an event stream fell more than")
    first = 100_000
    while log_of(mesh, "gateway").count("an event stream fell more than") == said:
        await write_events(mesh.nats_url, relabels(NODE, 1000, first=first), at_once=200)
        first += 1000
        assert first < 140_000, "the stalled stream was never dropped"
    await stalled.read_to_end(30)
    got = stalled.ids()
    assert got == list(range(start, start + len(got))) and got, (got[:3], got[-3:])

    last = await client.bus.last_sequence()
    resumed = await open_watcher(port, headers={"Last-Event-ID": str(got[-1])})
    try:
        rest = await resumed.read_until(last, 60)
    finally:
        resumed.close()
    print(f"\ndropped after {len(got)} events; resumed with Last-Event-ID {got[-1]} for {len(rest)} more")
    assert got + rest == list(range(start, last + 1))


async def fill_the_consumer_limit(js: JetStreamContext) -> list[str]:
    """Consumers of the event log added until the stream allows no more; their names."""
    names: list[str] = []
    while True:
        try:
            info = await js.add_consumer(s.EVENTS_STREAM, config=api.ConsumerConfig(inactive_threshold=120.0))
        except nats.js.errors.APIError as error:
            assert error.err_code == CONSUMER_LIMIT_CODE, error
            return names
        names.append(str(info.name))


async def test_a_service_started_while_the_log_has_no_room_for_its_consumer_waits_for_room(small_mesh: Mesh) -> None:
    mesh = small_mesh
    nc = await nats.connect(mesh.nats_url)
    client = Client(mesh.nats_url, timeout=10.0)
    await client.connect()
    try:
        js = nc.jetstream()
        mesh.stop_service("taints")  # first: a service stopped cleanly gives its consumer's room back
        fillers = await fill_the_consumer_limit(js)
        said = log_of(mesh, "taints").count("maximum consumers limit reached")
        mesh.start_service("taints")

        async def refused_once_more() -> bool:
            return log_of(mesh, "taints").count("maximum consumers limit reached") > said

        assert await holds_within(refused_once_more, 60)  # a service start, on a busy machine
        assert mesh.processes["taints"].poll() is None  # waiting, not exited
        for name in fillers:
            await js.delete_consumer(s.EVENTS_STREAM, name)
        await client.wait_ready(timeout=30)
        assert await client.taints(limit=1) is not None and mesh.processes["taints"].poll() is None
    finally:
        await client.close()
        await nc.close()
