"""Forged elections and NATS outages: scheduling goes on, nothing placed is lost or doubled, no healthy node dies."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import msgspec
import nats
import pytest

from schemas import ActorPlaced, ActorSubmitted, NodeDied, Placed, SchedulerElected, ScheduleRequest
from schemas import subjects as s
from services.client import Client
from services.local.mesh import Mesh
from services.runtime.runner import EXIT_LEASE_LOST
from tests.integration.conftest import FAST, holds_within, log_of, wait_ready
from tests.integration.log import read_events
from tests.integration.test_restart_and_snapshots import digest_of_a_replay_at

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

FORGERIES = (
    b'{"type":"SchedulerElected","epoch":999999999}',
    b'{"type":"SchedulerElected","epoch":999999999,"instance":"scheduler","event_id":"scheduler-elected-999999999"}',
)
"""A forged election naming no instance, and one naming the live leader (whose instance name is `scheduler`)."""


def kill_nats(mesh: Mesh) -> None:
    """nats-server killed (SIGKILL) when it is a local process, else stopped; its store stays for the restart."""
    process = mesh.nats.process
    if process is None:
        mesh.nats.stop()
        return
    process.kill()
    process.wait()


async def dead_letter_reasons(nats_url: str, service: str) -> list[str]:
    """The reasons of every event a service set aside so far."""
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        reasons: list[str] = []
        sub = await js.subscribe(
            s.event_dead_letter_subject(service), stream=s.DEAD_LETTERS_STREAM, ordered_consumer=True
        )
        while True:
            try:
                msg = await sub.next_msg(timeout=0.5)
            except nats.errors.TimeoutError:
                return reasons
            reasons.append((msg.headers or {}).get("Corral-Reason", ""))
    finally:
        await nc.close()


async def placed_actors(client: Client, nodes: int, actors: int, prefix: str) -> dict[str, str]:
    """Register `nodes` nodes of 10 CPUs (heartbeating) and place `actors` actors of 1 CPU; their placements."""
    for index in range(nodes):
        await client.register_node(f"{prefix}n{index}", {"CPU": 10})
    decisions = [await client.submit(ScheduleRequest(f"{prefix}a{i}", {"CPU": 1}), timeout=20) for i in range(actors)]
    assert all(isinstance(d, Placed) for d in decisions)
    return {d.id: d.node_id or "" for d in decisions if isinstance(d, Placed)}


async def assert_nothing_lost_or_doubled(client: Client, mesh: Mesh, before: dict[str, str]) -> None:
    """Every actor placed before is placed where it was, each decided once, no node over capacity, and the
    scheduler's view is the fold of the log."""
    status = await client.status()
    placed_now = {a.actor_id: a.node_id for a in status.actors}
    assert before.items() <= placed_now.items()
    assert all(node.available["CPU"] >= 0 for node in status.nodes)
    events = await read_events(mesh.nats_url)
    decided = Counter(e.request.actor_id for e in events if isinstance(e, ActorSubmitted | ActorPlaced) and e.request)
    assert set(decided.values()) == {1}
    assert not [e for e in events if isinstance(e, NodeDied)]
    live, replayed = await digest_of_a_replay_at(mesh, client, "scheduler")  # other services may append meanwhile
    assert live == replayed


async def test_a_forged_election_is_dead_lettered_and_every_scheduler_goes_on_serving(
    client: Client, mesh: Mesh
) -> None:
    """Elections no lease produced, published straight to the election subject, are skipped by every view and
    dead-lettered; the live scheduler goes on deciding, and so does a scheduler started after them."""
    before = await placed_actors(client, 1, 2, "")
    nc = await nats.connect(mesh.nats_url)
    try:
        for forgery in FORGERIES:
            await nc.jetstream().publish(s.ELECTIONS, forgery)
    finally:
        await nc.close()

    assert await client.submit(ScheduleRequest("after-forgery", {"CPU": 1}), timeout=10) == Placed(
        "after-forgery", "n0"
    )
    mesh.stop_service("scheduler")
    mesh.start_service("scheduler", instance="next")
    await wait_ready(client)
    assert await client.submit(ScheduleRequest("next-leader", {"CPU": 1}), timeout=10) == Placed("next-leader", "n0")
    assert mesh.processes["next"].poll() is None
    assert "leads from sequence" in log_of(mesh, "next")

    for service in ("scheduler", "labels", "vclusters"):
        reasons = await dead_letter_reasons(mesh.nats_url, service)
        assert sum("forged election" in reason for reason in reasons) == 1, (service, reasons)
    assert "forged election: no lease produced epoch 999999999" in log_of(mesh, "scheduler")
    assert not [e for e in await read_events(mesh.nats_url) if isinstance(e, SchedulerElected) and e.epoch > 10**6]
    await assert_nothing_lost_or_doubled(client, mesh, before)


LEASE_TTL = float(FAST["CORRAL_LEASE_TTL"])


@pytest.mark.parametrize("outage", [2 * LEASE_TTL / 3, 3 * LEASE_TTL], ids=["shorter", "longer"])
async def test_a_nats_outage_with_a_leader_and_a_standby_loses_and_doubles_nothing(
    client: Client, mesh: Mesh, outage: float
) -> None:
    """nats-server stopped and started on the same store, for less or more than the lease TTL: a scheduler
    leads afterwards, one at most, every actor placed before is still placed, and new requests are decided."""
    mesh.start_service("scheduler", instance="standby")
    before = await placed_actors(client, 4, 30, "")
    schedulers = {key: mesh.processes[key] for key in ("scheduler", "standby")}

    kill_nats(mesh)
    await asyncio.sleep(outage)
    mesh.nats.start()
    await wait_ready(client)
    after = [await client.submit(ScheduleRequest(f"b{i}", {"CPU": 1}), timeout=20) for i in range(10)]

    assert all(isinstance(d, Placed) for d in after)
    await assert_nothing_lost_or_doubled(client, mesh, before)
    codes = {key: process.poll() for key, process in schedulers.items()}
    assert set(codes.values()) <= {None, EXIT_LEASE_LOST}, codes  # a scheduler only ever leaves deposed
    assert None in codes.values()
    assert len(await client.placements()) == 40


async def test_an_outage_longer_than_the_heartbeat_timeout_kills_no_node(client: Client, mesh: Mesh) -> None:
    """Node agents heartbeat through an outage of twice the heartbeat timeout: labels declares nobody dead, and
    every actor stays placed."""
    before = await placed_actors(client, 3, 12, "")
    timeout = float(FAST["CORRAL_HEARTBEAT_TIMEOUT"])

    mesh.nats.stop()
    await asyncio.sleep(2 * timeout)
    mesh.nats.start()
    await wait_ready(client)
    watched_until = time.monotonic() + 2 * timeout  # long enough for labels to expire a node it thought silent
    while time.monotonic() < watched_until:
        assert len(await client.nodes()) == 3
        await asyncio.sleep(0.1)

    assert "is dead" not in log_of(mesh, "labels")
    assert "declared dead" not in log_of(mesh, "labels")
    assert await client.placements() == before
    await assert_nothing_lost_or_doubled(client, mesh, before)


async def test_a_leader_alone_wins_its_lapsed_lease_again_after_an_outage_longer_than_its_ttl(
    client: Client, mesh: Mesh
) -> None:
    """With no standby to take the lapsed lease, the leader takes it again under a new epoch, is elected again
    in the log, and goes on deciding in the same process."""
    before = await placed_actors(client, 2, 8, "")
    leader = mesh.processes["scheduler"]

    mesh.nats.stop()
    await asyncio.sleep(3 * LEASE_TTL)
    mesh.nats.start()
    await wait_ready(client)
    assert await client.submit(ScheduleRequest("after", {"CPU": 1}), timeout=20) == Placed("after", "n0")

    assert leader.poll() is None

    async def elected_again() -> bool:  # the request may be decided a moment before the lapse is noticed
        elections = [e for e in await read_events(mesh.nats_url) if isinstance(e, SchedulerElected)]
        return len(elections) > 1 and "had lapsed; taken again at epoch" in log_of(mesh, "scheduler")

    assert await holds_within(elected_again, timeout=10.0)
    elections = [e for e in await read_events(mesh.nats_url) if isinstance(e, SchedulerElected)]
    assert [e.instance for e in elections] == ["scheduler", "scheduler"]
    assert elections[0].epoch < elections[1].epoch
    await assert_nothing_lost_or_doubled(client, mesh, before)


HOSTILE_RECORDS = (b"[" * 5000 + b"]" * 5000, b'{"instance":"\xed\xb3\xbf","event_id":"x"}', b"\xff\xfe", b"{}")
"""What anyone allowed to write the election records could store: deep nesting, invalid UTF-8, bytes, a stub."""


async def test_hostile_election_records_are_no_elections_and_stop_no_reader(client: Client, mesh: Mesh) -> None:
    """Garbage stored as the records of some epochs, then elections claiming those epochs: every reader skips them
    and goes on; the leader goes on deciding and its digest equals a replay's."""
    await placed_actors(client, 1, 1, "")
    nc = await nats.connect(mesh.nats_url)
    try:
        js = nc.jetstream()
        for index, record in enumerate(HOSTILE_RECORDS):
            epoch = 999_000 + index
            await js.publish(f"$KV.{s.ELECTIONS_BUCKET}.{epoch}", record)
            forged = SchedulerElected(epoch=epoch, instance="scheduler", event_id=f"hostile-{epoch}")
            await js.publish(s.ELECTIONS, msgspec.json.encode(forged))
    finally:
        await nc.close()
    decision = await client.submit(ScheduleRequest("after-records", {"CPU": 1}), timeout=10)
    assert decision == Placed("after-records", "n0")
    assert all(process.poll() is None for process in mesh.processes.values())
    for service in ("scheduler", "labels", "vclusters"):
        reasons = await dead_letter_reasons(mesh.nats_url, service)
        assert sum("forged election" in reason for reason in reasons) == len(HOSTILE_RECORDS), (service, reasons)
    live, replayed = await digest_of_a_replay_at(mesh, client, "scheduler")  # other services may append meanwhile
    assert live == replayed
