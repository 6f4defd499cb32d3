"""Restarts: snapshot plus log tail equals the whole log; no Redis, a corrupt or old snapshot: full replay."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as redis

from schemas import PlacementGroupRequest, ScheduleRequest
from schemas import subjects as s
from schemas.queries import DigestQuery, DigestReply
from schemas.snapshots import SNAPSHOT_VERSION
from services.client import Client
from services.core.state import replay
from services.core.state.snapshot import digest
from services.local.mesh import Mesh
from services.runtime.codec import decode, encode
from services.runtime.snapshots import SnapshotStore
from services.taints.view import NODE_EVENTS
from tests.integration.conftest import log_of, wait_ready
from tests.integration.log import read_events, read_sequenced

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def workload(client: Client, prefix: str) -> None:
    """Nodes, labels, taints, placed and pending actors, a placement group, a removal."""
    await client.register_node(f"{prefix}n1", {"CPU": 4}, labels={"disk": "ssd"}, zone="z1")
    await client.register_node(f"{prefix}n2", {"CPU": 4}, zone="z2")
    await client.add_taints(f"{prefix}n2", {"gpu": "true"})
    for index in range(6):
        await client.submit(ScheduleRequest(f"{prefix}a{index}", {"CPU": 1}, labels={"app": "web"}))
    await client.submit(ScheduleRequest(f"{prefix}big", {"CPU": 64}))
    await client.create_placement_group(PlacementGroupRequest(f"{prefix}pg", [{"CPU": 1}, {"CPU": 1}]))
    await client.remove_actor(f"{prefix}a0")


async def service_digest(client: Client, service: str) -> DigestReply:
    """Ask a service for its view digest."""
    reply = await client.bus.nc.request(s.digest_subject(service), encode(DigestQuery()), timeout=5)
    answer: DigestReply = decode(reply.data, DigestReply)
    return answer


async def full_replay_digest(mesh: Mesh) -> str:
    """The digest of a view folded from the whole log by the test itself."""
    return digest(replay(await read_events(mesh.nats_url)))


async def digest_of_a_replay_at(mesh: Mesh, client: Client, service: str, patience: float = 10.0) -> tuple[str, str]:
    """A service's live digest and that of a replay of the log to the same sequence, once they agree or after
    `patience` seconds (a leader holds its newest decisions a moment before the log does)."""
    deadline = asyncio.get_running_loop().time() + patience
    while True:
        live = await service_digest(client, service)
        replayed = digest(replay(await read_events(mesh.nats_url, live.sequence)))
        if live.digest == replayed or asyncio.get_running_loop().time() > deadline:
            return live.digest, replayed
        await asyncio.sleep(0.2)


async def restart(mesh: Mesh, client: Client, service: str) -> None:
    """Stop a service gracefully and start it again."""
    mesh.stop_service(service)
    mesh.start_service(service)
    await wait_ready(client)


async def test_a_service_restarted_from_its_snapshot_reaches_the_digest_of_a_full_replay(
    client: Client, mesh: Mesh
) -> None:
    """Snapshot at stop, more events while it is down, restart: the same digest as folding the whole log."""
    await workload(client, "")
    mesh.stop_service("labels")
    await client.submit(ScheduleRequest("while-down", {"CPU": 1}))
    mesh.start_service("labels")
    await restart(mesh, client, "scheduler")
    await wait_ready(client)
    assert "snapshot at sequence" in log_of(mesh, "labels")
    assert "snapshot at sequence" in log_of(mesh, "scheduler")
    expected = await full_replay_digest(mesh)
    assert (await service_digest(client, "scheduler")).digest == expected
    assert (await service_digest(client, "labels")).digest == expected


async def test_with_redis_empty_a_service_replays_the_whole_log_and_says_so(client: Client, mesh: Mesh) -> None:
    """Flushing Redis loses no data: the restarted scheduler logs a full replay and has the same view."""
    await workload(client, "")
    async with redis.Redis(port=mesh.redis.port) as store:
        await store.flushall()
    await restart(mesh, client, "scheduler")
    assert "no snapshot of scheduler: replaying the whole log" in log_of(mesh, "scheduler")
    assert (await service_digest(client, "scheduler")).digest == await full_replay_digest(mesh)


async def test_with_redis_unreachable_a_service_still_starts(client: Client, mesh: Mesh) -> None:
    """Redis down: the scheduler starts from the log alone and decides."""
    await workload(client, "")
    mesh.redis.stop()
    await restart(mesh, client, "scheduler")
    assert "snapshot store unreachable" in log_of(mesh, "scheduler")
    decision = await client.submit(ScheduleRequest("after", {"CPU": 1}))
    assert decision.id == "after"


@pytest.mark.parametrize("blob", [b"\x93garbage", b"old"], ids=["a corrupt snapshot", "an old-version snapshot"])
async def test_an_unreadable_snapshot_is_refused(client: Client, mesh: Mesh, blob: bytes) -> None:
    """A snapshot blob that does not decode, or of another version, is refused with a log line and a full replay."""
    await workload(client, "")
    mesh.stop_service("scheduler")
    store = SnapshotStore(f"redis://127.0.0.1:{mesh.redis.port}/0")
    if blob == b"old":
        found = await store.load("scheduler")
        assert found is not None
        current = b"\xb0snapshot_version" + bytes([SNAPSHOT_VERSION])
        blob = found.blob.replace(current, b"\xb0snapshot_version\x63")
        assert blob != found.blob
    async with redis.Redis(port=mesh.redis.port) as raw:
        await raw.hset(SnapshotStore.key("scheduler"), "blob", blob)
    await store.close()
    mesh.start_service("scheduler")
    await wait_ready(client)
    assert "snapshot refused" in log_of(mesh, "scheduler")
    assert (await service_digest(client, "scheduler")).digest == await full_replay_digest(mesh)


async def test_a_snapshot_with_one_bit_flipped_is_refused(client: Client, mesh: Mesh) -> None:
    """A blob that still decodes after a bit flipped (a free amount, a label) fails its seal: a full replay, not a
    view that differs from the log."""
    await workload(client, "")
    mesh.stop_service("labels")
    key = SnapshotStore.key("labels")
    async with redis.Redis(port=mesh.redis.port) as raw:
        blob = await raw.hget(key, "blob")
        assert isinstance(blob, bytes)
        free = blob.index(b"\xa4free")  # the first node's free amounts: a flip there still decodes
        flipped = blob[: free + 12] + bytes([blob[free + 12] ^ 1]) + blob[free + 13 :]
        await raw.hset(key, "blob", flipped)
    mesh.start_service("labels")
    await wait_ready(client)
    live, replayed = await digest_of_a_replay_at(mesh, client, "labels", patience=2.0)
    assert live == replayed
    assert "the record is not as it was saved" in log_of(mesh, "labels")


async def test_a_snapshot_key_of_another_redis_type_is_replaced_at_the_next_save(client: Client, mesh: Mesh) -> None:
    """A string where the snapshot hash belongs: the service replays the whole log, and its next snapshot (at
    stop) takes the key back."""
    await workload(client, "")
    mesh.stop_service("taints")
    key = SnapshotStore.key("taints")
    async with redis.Redis(port=mesh.redis.port) as raw:
        await raw.delete(key)
        await raw.set(key, b"not a hash")
        await restart(mesh, client, "taints")
        mesh.stop_service("taints")
        assert await raw.type(key) == b"hash"
        assert int(await raw.hget(key, "sequence") or 0) > 0
    assert "snapshot of taints unreadable (WRONGTYPE" in log_of(mesh, "taints")


async def test_nats_restarted_under_the_services_loses_nothing(client: Client, mesh: Mesh) -> None:
    """Stop and start nats-server (same store): services reconnect, old placements stay, new requests decide."""
    await workload(client, "")
    before = await client.placements()
    mesh.nats.stop()
    await asyncio.sleep(0.5)
    mesh.nats.start()
    await wait_ready(client)
    decision = await client.submit(ScheduleRequest("after-restart", {"CPU": 1}), timeout=15)
    assert decision.id == "after-restart"
    after = await client.placements()
    assert before.items() <= after.items()
    assert (await service_digest(client, "scheduler")).digest == await full_replay_digest(mesh)


async def test_the_taints_service_reads_only_node_and_taint_events_and_restarts_onto_the_same_view(
    client: Client, mesh: Mesh
) -> None:
    """The server sends taints no actor events; its snapshot plus the filtered tail equals folding its events."""
    await workload(client, "")
    mesh.stop_service("taints")
    await client.register_node("while-down", {"CPU": 2})
    await client.submit(ScheduleRequest("while-down-actor", {"CPU": 1}))
    mesh.start_service("taints")
    await wait_ready(client)
    await client.add_taints("while-down", {"spot": "true"})
    await client.submit(ScheduleRequest("after", {"CPU": 1}))
    assert "snapshot at sequence" in log_of(mesh, "taints")
    sequenced = await read_sequenced(mesh.nats_url)
    theirs = [e for _, e in sequenced if isinstance(e, NODE_EVENTS)]
    reply = await service_digest(client, "taints")
    assert reply.digest == digest(replay(theirs))
    log_end = sequenced[-1][0]
    newest_of_theirs = max(sequence for sequence, e in sequenced if isinstance(e, NODE_EVENTS))
    assert reply.sequence == newest_of_theirs < log_end
