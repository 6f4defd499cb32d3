"""The mesh on a three-server NATS cluster at CORRAL_REPLICAS=3 loses nothing when the event log's leader dies.

Three local nats-servers cluster on loopback; the services and a client connect to all three. Under a load of
durable submits, the server leading `CORRAL_EVENTS` is killed (SIGKILL). Every request is answered (the client
sends again with the same idempotency key), none is decided twice, no node holds more than it has, the mesh serves
again within seconds (the gap is measured and printed), and the killed server catches up once started again.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import nats.errors
import pytest

from schemas import (
    ActorPending,
    ActorPlaced,
    ActorSubmitted,
    AnyEvent,
    NodeRegistered,
    Pending,
    Placed,
    ScheduleRequest,
)
from schemas import subjects as s
from services.client import Client, UnavailableError
from services.local.mesh import SERVICES, Mesh
from services.local.servers import redis_server
from services.runtime.bus import Bus
from services.runtime.connection import STREAMS
from services.runtime.settings import Settings
from tests.integration.cluster import NatsCluster, start_cluster, wait_for_jetstream
from tests.integration.conftest import FAST, holds_within, log_of
from tests.integration.log import read_events

pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.timeout(90)]

NODES, CPUS = 4, 60
"""Room for 240 one-CPU actors: the rest of the load waits (so a double decision would over-allocate)."""
SUBMITS, SENDERS = 300, 12
RESEND_PAUSE = 0.1
"""A sender whose request went unanswered waits this long before sending it again (with the same key)."""
REPLICATED = (
    s.EVENTS_STREAM,
    s.REQUESTS_STREAM,
    s.DEAD_LETTERS_STREAM,
    f"KV_{s.LEASE_BUCKET}",
    f"KV_{s.ELECTIONS_BUCKET}",
    f"KV_{s.REFUSALS_BUCKET}",
)
"""Every stream the mesh makes: the log, the work queue, the dead letters, the lease, the election records and the
refusals kept for resends."""
KILL_AFTER = 80
"""Answers before the leader of the event log is killed."""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    """Three clustered nats-servers, JetStream answering."""
    running = start_cluster(tmp_path / "nats")
    try:
        asyncio.run(wait_for_jetstream(running.url))
        yield running
    finally:
        running.close()


@pytest.fixture
def mesh_r3(tmp_path: Path, cluster: NatsCluster) -> Iterator[Mesh]:
    """The services on the cluster at CORRAL_REPLICAS=3, each connected to all three servers."""
    redis = redis_server(tmp_path / "redis").start()
    settings = {**FAST, "CORRAL_NATS_URL": cluster.url, "CORRAL_REPLICAS": "3", "CORRAL_HEARTBEAT_TIMEOUT": "60"}
    mesh = Mesh(tmp_path / "mesh", cluster.servers[0], redis, settings=settings)
    mesh.data_dir.mkdir(parents=True)
    try:
        for name in SERVICES:
            mesh.start_service(name)
        yield mesh
    finally:
        mesh.close()


async def replicas_of(client: Client) -> dict[str, int]:
    """How many servers keep each stream of the mesh (a KV bucket is stream `KV_<bucket>`)."""
    streams = [info.config for info in await client.bus.js.streams_info()]
    return {config.name or "": config.num_replicas or 1 for config in streams}


async def stream_leader(client: Client, unless: str = "", stream: str = s.EVENTS_STREAM) -> str:
    """The name of the server leading `stream` ("" while it has none, or only the server `unless`)."""
    try:
        info = await client.bus.nc.jetstream(timeout=0.25).stream_info(stream)
    except (TimeoutError, nats.errors.Error):  # no leader to answer
        return ""
    leader = info.cluster.leader if info.cluster is not None else ""
    return "" if leader == unless else leader or ""


async def caught_up(client: Client, name: str, timeout: float = 20.0) -> bool:
    """Whether server `name` holds a current replica of the event log with no lag, within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            info = await client.bus.js.stream_info(s.EVENTS_STREAM)
            replicas = {peer.name: peer for peer in (info.cluster.replicas if info.cluster else None) or []}
            peer = replicas.get(name)
            if peer is not None and peer.current and not peer.lag:
                return True
        except (TimeoutError, nats.errors.Error):  # the restarted server is still joining
            pass
        await asyncio.sleep(0.2)
    return False


def assert_decided_once(events: list[AnyEvent]) -> int:
    """Each actor submitted once, placed at most once and never both pending and placed (nothing was freed), and no
    node holding more CPU than it has, as the log says; returns how many actors were placed."""
    placed = Counter(e.actor_id for e in events if isinstance(e, ActorPlaced))
    submitted = Counter(e.request.actor_id for e in events if isinstance(e, ActorSubmitted | ActorPlaced) and e.request)
    assert max(placed.values()) == 1, "an actor placed twice"
    assert set(submitted.values()) == {1} and len(submitted) == SUBMITS, "a request stored twice, or lost"
    pending = {e.actor_id for e in events if isinstance(e, ActorPending)}
    assert not pending & set(placed), "an actor decided twice: pending, then placed with nothing freed"
    capacity = {e.node_id: e.resources["CPU"] for e in events if isinstance(e, NodeRegistered)}
    used = Counter(e.node_id for e in events if isinstance(e, ActorPlaced))  # each actor asks for 1 CPU
    assert all(used[node] <= capacity[node] for node in used), f"over-allocated: {dict(used)} of {capacity}"
    return len(placed)


async def test_killing_the_event_logs_leader_loses_no_request_and_decides_none_twice(
    mesh_r3: Mesh, cluster: NatsCluster
) -> None:
    async with Client(cluster.url, timeout=5.0) as client:
        await client.wait_ready(timeout=30.0)
        assert await replicas_of(client) == dict.fromkeys(REPLICATED, 3)
        for index in range(NODES):
            await client.register_node(f"n{index}", {"CPU": CPUS})
        answers: list[float] = []
        decisions: dict[str, Placed | Pending] = {}
        resent: Counter[str] = Counter()
        killed: list[tuple[str, float]] = []
        queue: asyncio.Queue[int] = asyncio.Queue()
        for number in range(SUBMITS):
            queue.put_nowait(number)

        async def sender() -> None:
            while not queue.empty():
                actor = f"a{queue.get_nowait()}"
                request = ScheduleRequest(actor, {"CPU": 1})
                while actor not in decisions:
                    try:
                        decisions[actor] = await client.submit(request, timeout=2.0, command_id=f"submit-{actor}")
                        answers.append(time.monotonic())
                    except UnavailableError:
                        resent[actor] += 1
                        await asyncio.sleep(RESEND_PAUSE)

        async def killer() -> None:
            while len(answers) < KILL_AFTER or not (leader := await stream_leader(client)):
                await asyncio.sleep(0.01)
            cluster.kill(leader)
            killed.append((leader, time.monotonic()))
            while await stream_leader(client, unless=leader) == "":
                await asyncio.sleep(0.05)
            killed.append(("", time.monotonic()))

        await asyncio.wait_for(asyncio.gather(killer(), *(sender() for _ in range(SENDERS))), timeout=60.0)

        (leader, at), (_, elected) = killed
        after = [answer for answer in answers if answer > at]
        gap = max(later - earlier for earlier, later in zip([at, *after], after, strict=False))
        print(
            f"\nkilled {leader}, the leader of {s.EVENTS_STREAM}, after {KILL_AFTER} answers: a new leader "
            f"{elected - at:.2f}s later, no answer for {gap:.2f}s at most after the kill; "
            f"{sum(resent.values())} requests sent again with their keys"
        )
        assert len(decisions) == SUBMITS
        assert gap < 30.0

        placed = assert_decided_once(await read_events(cluster.url))
        assert sum(isinstance(d, Placed) for d in decisions.values()) == placed == NODES * CPUS

        cluster.named(leader).start()
        assert await caught_up(client, leader), f"{leader} did not catch up with the event log"


async def test_a_request_sent_while_its_stream_elects_a_leader_is_stored_once_one_is_elected(
    mesh_r3: Mesh, cluster: NatsCluster
) -> None:
    """The leader of the requests stream is killed and a request sent at once: the client, connected to another
    server, sends it again until the stream has a leader (it was told "the requests stream is missing")."""
    async with Client(cluster.url, timeout=5.0) as client:
        await client.wait_ready(timeout=30.0)
        await client.register_node("n0", {"CPU": 4})
        leader = await stream_leader(client, stream=s.REQUESTS_STREAM)
        assert leader
    others = ",".join(
        f"nats://127.0.0.1:{server.port}" for server in cluster.servers if server != cluster.named(leader)
    )
    async with Client(others, timeout=5.0) as client:
        await client.status()
        cluster.kill(leader)
        began = time.monotonic()
        decision = await client.submit(ScheduleRequest("during", {"CPU": 1}), timeout=30.0)
        print(f"\nkilled {leader}, the leader of {s.REQUESTS_STREAM}: decided {time.monotonic() - began:.2f}s later")
        assert isinstance(decision, Placed)


async def test_a_request_whose_stream_has_no_leader_for_its_whole_timeout_is_said_to_wait_for_an_election(
    mesh_r3: Mesh, cluster: NatsCluster
) -> None:
    """Two servers of three killed: the streams cannot elect a leader, and the client says so after its timeout."""
    async with Client(cluster.url, timeout=5.0) as client:
        await client.wait_ready(timeout=30.0)
    cluster.kill("s1")
    cluster.kill("s2")
    async with Client(f"nats://127.0.0.1:{cluster.named('s0').port}", timeout=5.0) as client:
        began = time.monotonic()
        with pytest.raises(UnavailableError, match=r"the event log is electing a leader \(NATS JetStream cluster\)"):
            await client.submit(ScheduleRequest("orphan", {"CPU": 1}), timeout=2.0)
        assert time.monotonic() - began >= 2.0  # sent again until its timeout


async def test_a_stream_kept_on_one_server_is_moved_to_the_replicas_asked_for(cluster: NatsCluster) -> None:
    """CORRAL_EVENTS made at R1 (by an older Corral, say) is kept on three servers once a service at R3 starts."""
    bus = await Bus.connect(Settings(nats_url=cluster.url, replicas=3), "test-replicas")
    try:
        events = next(config for config in STREAMS if config.name == s.EVENTS_STREAM)
        await bus.with_retries(lambda: bus.js.add_stream(events), "CORRAL_EVENTS at R1")  # a cluster just formed
        await bus.ensure_streams()
        info = await bus.js.stream_info(s.EVENTS_STREAM)
        assert (info.config.num_replicas, info.config.subjects) == (3, events.subjects)
    finally:
        await bus.close()


async def test_three_replicas_asked_for_before_the_third_server_joins_wait_for_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Servers started together join one by one: a stream asked for on three while two answer is asked for again,
    said once in the log, and kept on three once the third joins (it was a setting error, and the service exited)."""
    running = start_cluster(tmp_path / "nats")
    try:
        running.kill("s2")
        await wait_for_jetstream(running.url)  # two of three elect a meta leader
        bus = await Bus.connect(Settings(nats_url=running.url, replicas=3), "test-joining")
        try:
            declared = asyncio.ensure_future(bus.ensure_streams((s.EVENTS_STREAM,)))

            async def asked_again() -> bool:
                return "while servers join" in caplog.text

            assert await holds_within(asked_again, timeout=20.0), caplog.text
            assert not declared.done()
            running.named("s2").start()
            await asyncio.wait_for(declared, timeout=30.0)
            info = await bus.js.stream_info(s.EVENTS_STREAM)
            assert info.config.num_replicas == 3
            assert caplog.text.count("while servers join") == 1
        finally:
            await bus.close()
    finally:
        running.close()


async def test_more_replicas_than_servers_stop_a_service_with_the_setting_named(servers: Mesh) -> None:
    """On a single server, CORRAL_REPLICAS=3 cannot be kept: the service exits 2 saying so, and makes nothing."""
    servers.settings["CORRAL_REPLICAS"] = "3"
    process = servers.start_service("labels")
    assert process.wait(timeout=30) == 2
    assert "CORRAL_REPLICAS 3: NATS cannot keep CORRAL_EVENTS on 3 servers" in log_of(servers, "labels")
    async with Client(servers.nats_url) as client:
        assert await client.bus.js.streams_info() == []
