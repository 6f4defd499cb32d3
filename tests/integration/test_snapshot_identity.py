"""Snapshots that do not belong to the log and service at hand are refused, and never block the next save.

Each service records with its snapshot the log it was folded from, itself and the snapshot version; one that does
not match, or claims a sequence past the log's end, is refused in one log line and the whole log is replayed.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil

import nats
import pytest
import redis.asyncio as redis

from schemas import ScheduleRequest
from schemas import subjects as s
from schemas.decisions import Placed
from schemas.queries import DigestQuery, DigestReply
from schemas.snapshots import SNAPSHOT_VERSION
from services.client import Client
from services.local.mesh import SERVICES, Mesh
from services.runtime.codec import decode, encode
from services.runtime.snapshots import SnapshotStore, seal
from tests.core.builders import affinity
from tests.integration.conftest import log_of, wait_ready
from tests.integration.test_restart_and_snapshots import (
    digest_of_a_replay_at,
    full_replay_digest,
    service_digest,
    workload,
)
from tests.support.servers import ContainerServer

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

FORGED = 1_000_000_000


def refusals(mesh: Mesh, service: str) -> list[str]:
    """The lines in which a service refused its snapshot."""
    return [line for line in log_of(mesh, service).splitlines() if "snapshot refused" in line]


async def stored(mesh: Mesh, service: str) -> dict[str, str]:
    """A service's snapshot record in Redis, without the blob."""
    async with redis.Redis(port=mesh.redis.port) as raw:
        record = await raw.hgetall(SnapshotStore.key(service))
    return {_text(key): _text(value) for key, value in record.items() if key != b"blob"}


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def lose_the_event_store(mesh: Mesh) -> None:
    """Stop the services and lose JetStream's store (Redis keeps the snapshots); then start everything again."""
    for key in list(mesh.processes):
        mesh.stop_service(key)
    if isinstance(mesh.nats, ContainerServer):  # the store lives inside the container: delete the streams
        connection = await nats.connect(mesh.nats_url)
        for stream in (s.EVENTS_STREAM, s.DEAD_LETTERS_STREAM, s.REQUESTS_STREAM):
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await connection.jetstream().delete_stream(stream)
        await connection.close()
    else:
        mesh.nats.stop()
        shutil.rmtree(mesh.data_dir / "nats" / "jetstream")
        mesh.nats.start()
    for name in SERVICES:
        mesh.start_service(name)


async def test_with_the_event_store_lost_every_service_refuses_its_old_snapshot_and_places_on_live_nodes_only(
    client: Client, mesh: Mesh
) -> None:
    """Old snapshots of a lost log: no phantom node is kept, nothing lands on one, and the views equal a replay.

    The old nodes' agents stop first: a running agent whose node the new log does not know registers it again."""
    async with Client(mesh.nats_url) as agents:
        await workload(agents, "old-")
    await lose_the_event_store(mesh)
    async with Client(mesh.nats_url, timeout=10.0) as after:  # a new connection: no reconnect back-off to wait out
        await wait_ready(after)
        await after.register_node("fresh", {"CPU": 8})
        for index in range(4):
            decision = await after.submit(ScheduleRequest(f"new{index}", {"CPU": 1}))
            assert isinstance(decision, Placed) and decision.node_id == "fresh", decision
        assert [node.node_id for node in await after.nodes()] == ["fresh"]
        for service in ("scheduler", "labels"):
            live, replayed = await digest_of_a_replay_at(mesh, after, service)
            assert live == replayed, service
    for name in SERVICES:
        assert len(refusals(mesh, name)) == 1, f"{name}: {refusals(mesh, name)}"
        assert "folded from the log created" in refusals(mesh, name)[0]


async def test_a_snapshot_of_another_service_is_refused_and_replaced_by_the_services_own(
    client: Client, mesh: Mesh
) -> None:
    """The taints snapshot (nodes only) copied into the scheduler's key: refused, nothing placed is forgotten."""
    await workload(client, "")
    # The taints snapshot now lies past every actor event; tainted, the node takes none of the waiting work.
    await client.register_node("late", {"CPU": 2}, taints={"hold": "true"})
    placed = await client.placements()
    mesh.stop_service("taints")
    mesh.stop_service("scheduler")
    async with redis.Redis(port=mesh.redis.port) as raw:
        await raw.copy(SnapshotStore.key("taints"), SnapshotStore.key("scheduler"), replace=True)
    mesh.start_service("taints")
    mesh.start_service("scheduler")
    await wait_ready(client)
    assert await client.placements() == placed
    assert (await service_digest(client, "scheduler")).digest == await full_replay_digest(mesh)
    [line] = refusals(mesh, "scheduler")
    assert "written by taints, not by scheduler" in line
    mesh.stop_service("scheduler")
    assert (await stored(mesh, "scheduler"))["service"] == "scheduler"


async def test_a_forged_sequence_is_refused_and_the_next_save_succeeds(client: Client, mesh: Mesh) -> None:
    """A record claiming sequence 1e9 of a short log: refused, full replay, then the service's own save lands."""
    await workload(client, "")
    mesh.stop_service("scheduler")
    async with redis.Redis(port=mesh.redis.port) as raw:
        await raw.hset(SnapshotStore.key("scheduler"), "sequence", FORGED)
    mesh.start_service("scheduler")
    await wait_ready(client)
    await client.submit(ScheduleRequest("after", {"CPU": 1}))
    reply = await service_digest(client, "scheduler")
    assert reply.digest == await full_replay_digest(mesh)
    mesh.stop_service("scheduler")
    record = await stored(mesh, "scheduler")
    saved = int(record["sequence"])  # at stop: what it folded by then, the digest's sequence or later
    assert saved >= reply.sequence and "refused" not in record
    mesh.start_service("scheduler")
    await wait_ready(client)
    assert f"snapshot at sequence {saved} loaded" in log_of(mesh, "scheduler")
    assert f"at sequence {FORGED} loaded" not in log_of(mesh, "scheduler")
    [line] = refusals(mesh, "scheduler")
    assert f"claims sequence {FORGED}, past the log's end" in line


async def test_a_stale_writer_does_not_replace_a_newer_snapshot_of_the_same_log(mesh: Mesh) -> None:
    """Standby schedulers share a key: an older snapshot of the same log loses; one of another log, or a refused
    one, is replaced."""
    store = SnapshotStore(f"redis://127.0.0.1:{mesh.redis.port}/0")
    try:
        assert await store.save("standby-test", 10, b"ten", "log-a")
        assert not await store.save("standby-test", 5, b"five", "log-a")
        assert (await stored(mesh, "standby-test"))["sequence"] == "10"
        assert await store.save("standby-test", 3, b"three", "log-b")
        found = await store.load("standby-test")
        assert found is not None and found.log == "log-b"
        await store.refuse("standby-test", found, "a test refused it")
        assert await store.save("standby-test", 2, b"two", "log-b")
        assert await stored(mesh, "standby-test") == {
            "sequence": "2",
            "log": "log-b",
            "service": "standby-test",
            "version": str(SNAPSHOT_VERSION),
            "seal": seal("2", b"two", "log-b", "standby-test", str(SNAPSHOT_VERSION)),
        }
    finally:
        await store.close()


async def every_digest(client: Client, service: str, answers: int) -> list[DigestReply]:
    """The digest replies of every running instance of a service (a leader and its standbys all answer)."""
    inbox = client.bus.nc.new_inbox()
    subscription = await client.bus.nc.subscribe(inbox, max_msgs=answers)
    try:
        await client.bus.nc.publish(s.digest_subject(service), encode(DigestQuery()), reply=inbox)
        return [decode((await subscription.next_msg(timeout=5)).data, DigestReply) for _ in range(answers)]
    finally:
        await subscription.unsubscribe()


async def test_the_live_schedulers_digest_after_custom_topology_decisions_equals_a_fresh_schedulers(
    client: Client, mesh: Mesh
) -> None:
    """Affinity on a custom topology key widens the leader's index; a scheduler started afterwards, folding the
    whole log as a standby, has the leader's digest at the same sequence."""
    for index in range(4):
        await client.register_node(f"n{index}", {"CPU": 4}, labels={"rack": f"r{index % 2}"})
    await client.submit(ScheduleRequest("web", {"CPU": 1}, labels={"app": "web"}))
    near = affinity("app", "IN", ["web"], topology_key="rack")
    for index in range(3):
        db = ScheduleRequest(f"near{index}", {"CPU": 1}, labels={"app": "db"}, scheduling_strategy=near)
        await client.submit(db)
    far = affinity("app", "NOT_IN", ["web"], topology_key="rack")
    await client.submit(ScheduleRequest("far", {"CPU": 1}, scheduling_strategy=far))
    live = await service_digest(client, "scheduler")
    assert live.digest == await full_replay_digest(mesh)
    async with redis.Redis(port=mesh.redis.port) as raw:
        await raw.delete(SnapshotStore.key("scheduler"))
    mesh.start_service("scheduler", instance="fresh")
    deadline = asyncio.get_running_loop().time() + 15
    while "serving" not in log_of(mesh, "fresh"):
        assert asyncio.get_running_loop().time() < deadline, log_of(mesh, "fresh")
        await asyncio.sleep(0.05)
    while True:  # the two answer at the same sequence once the standby folded what was appended meanwhile
        leader, standby = await every_digest(client, "scheduler", 2)
        if leader.sequence == standby.sequence:
            break
        assert asyncio.get_running_loop().time() < deadline, (leader, standby)
    assert leader.digest == standby.digest
    assert leader.sequence >= live.sequence
