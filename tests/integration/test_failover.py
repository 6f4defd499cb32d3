"""`kill -9` of the active scheduler mid-stream: the standby takes over, every request gets one decision."""

from __future__ import annotations

import asyncio
from collections import Counter
from functools import partial

import pytest

from schemas import (
    ActorPlaced,
    ActorSubmitted,
    Placed,
    ScheduleRequest,
    VirtualCluster,
    VirtualNodesReserved,
)
from schemas import subjects as s
from services.client import Client
from services.core.errors import UnavailableError
from services.core.state import replay
from services.local.mesh import Mesh
from services.runtime.bus import Bus
from services.runtime.elections import new_election, record_election
from services.runtime.runner import EXIT_LEASE_LOST
from services.runtime.settings import Settings
from tests.integration.conftest import holds_within, log_of, wait_ready
from tests.integration.in_flight import Timed
from tests.integration.log import read_events

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

REQUESTS = 120


async def test_killing_the_active_scheduler_loses_no_request_and_allocates_nothing_twice(
    client: Client, mesh: Mesh
) -> None:
    """A standby wins the lease after the kill; all requests are decided exactly once; no node is overfull."""
    mesh.start_service("scheduler", instance="standby")
    for index in range(4):
        await client.register_node(f"n{index}", {"CPU": 40})

    timed = Timed()

    async def submit(index: int) -> object:
        await asyncio.sleep(index * 0.01)
        request = ScheduleRequest(f"a{index}", {"CPU": 1})
        return await timed.send(request.actor_id, lambda: client.submit(request, timeout=20.0))

    stream = asyncio.gather(*(submit(i) for i in range(REQUESTS)))
    killed = await timed.flowing()
    mesh.stop_service("scheduler", hard=True)
    decisions = await asyncio.wait_for(stream, timeout=60)

    assert timed.in_flight_at(killed), "no request was in flight at the kill"
    assert all(isinstance(d, Placed) for d in decisions)
    assert "won the lease" in log_of(mesh, "standby")
    events = await read_events(mesh.nats_url)
    submitted = Counter(e.request.actor_id for e in events if isinstance(e, ActorSubmitted | ActorPlaced) and e.request)
    assert len(submitted) == REQUESTS and set(submitted.values()) == {1}
    status = await client.status()
    assert all(node.available["CPU"] >= 0 for node in status.nodes)
    used = sum(node.resources["CPU"] - node.available["CPU"] for node in status.nodes)
    assert used == REQUESTS
    placed_now = {a.actor_id: a.node_id for a in status.actors}
    assert all(placed_now[d.id] == d.node_id for d in decisions if isinstance(d, Placed))
    assert len({e.actor_id for e in events if isinstance(e, ActorPlaced)}) == REQUESTS


async def test_a_standby_taking_over_mid_stream_admits_and_schedules_virtual_clusters_once(
    client: Client, mesh: Mesh
) -> None:
    """Clusters requested and work sent into them across a kill -9: each cluster reserved once, nothing overfull."""
    mesh.start_service("scheduler", instance="standby")
    for index in range(4):
        await client.register_node(f"n{index}", {"CPU": 40})
    tenants = [f"t{index}" for index in range(8)]

    timed = Timed()

    async def tenant(index: int, vc_id: str) -> list[object]:
        await asyncio.sleep(index * 0.05)
        spec = VirtualCluster(flexible_resource_min={"CPU": 2}, flexible_resource_max={"CPU": 8})
        await timed.send(vc_id, lambda: client.create_virtual_cluster(vc_id, spec, timeout=20.0))
        work = [ScheduleRequest(f"{vc_id}-a{i}", {"CPU": 1}, vcluster_id=vc_id) for i in range(6)]
        return [await timed.send(r.actor_id, partial(client.submit, r, timeout=20.0)) for r in work]

    stream = asyncio.gather(*(tenant(i, vc_id) for i, vc_id in enumerate(tenants)))
    killed = await timed.flowing()
    mesh.stop_service("scheduler", hard=True)
    decisions = [d for per_tenant in await asyncio.wait_for(stream, timeout=60) for d in per_tenant]

    assert timed.in_flight_at(killed), "no request was in flight at the kill"
    assert all(isinstance(d, Placed) for d in decisions)
    assert "won the lease" in log_of(mesh, "standby")
    events = await read_events(mesh.nats_url)
    admitted = Counter(e.vc_id for e in events if isinstance(e, VirtualNodesReserved))
    assert sorted(admitted) == tenants and set(admitted.values()) == {1}
    for vc_id in tenants:
        info = await client.virtual_cluster(vc_id)
        assert info.state == "admitted" and info.total_resources == {"CPU": 6.0}
        assert sorted(await client.placements(vcluster_id=vc_id)) == [f"{vc_id}-a{i}" for i in range(6)]
    nodes = await client.nodes()
    assert all(node.available["CPU"] >= 0 for node in nodes)
    assert sum(node.resources["CPU"] - node.available["CPU"] for node in nodes) == 8 * 6


async def test_a_leader_deposed_without_noticing_answers_nothing_and_the_next_one_decides(
    client: Client, mesh: Mesh
) -> None:
    """A newer election lands in the log behind the leader's back: its next batch counts for no view, so it is
    neither answered nor acked; the leader exits, and the next scheduler decides the request exactly once."""
    await client.register_node("n1", {"CPU": 4})
    await client.submit(ScheduleRequest("before", {"CPU": 1}))
    usurper = await Bus.connect(Settings(nats_url=mesh.nats_url), "test-usurper")
    try:
        # A real lease write makes a real epoch; the value stays the leader's, so only the log can tell it.
        lease = await usurper.lease_bucket()
        held = await lease.get(s.SCHEDULER_LEASE_KEY)
        epoch = await lease.update(s.SCHEDULER_LEASE_KEY, held.value or b"", last=held.revision)
        elected = new_election(epoch, "usurper")
        await record_election(usurper.js, elected)  # as a lease winner does: this election is genuine
        await usurper.append([elected])
    finally:
        await usurper.close()

    with pytest.raises(UnavailableError, match="no decision within"):
        await client.submit(ScheduleRequest("late", {"CPU": 1}), timeout=1.0)
    deposed = mesh.processes["scheduler"]
    assert await asyncio.to_thread(deposed.wait, 10) == EXIT_LEASE_LOST
    assert "a newer scheduler was elected: this batch is left unanswered" in log_of(mesh, "scheduler")
    # Its view holds the batch it decided, which every fold of the log ignores: it must save no snapshot, or the
    # next leader would load "late" as placed, answer the request from it and never write the placement.
    assert "snapshot saved" not in log_of(mesh, "scheduler")

    mesh.start_service("scheduler", instance="next")
    await wait_ready(client)

    async def late_placed() -> bool:
        return "late" in await client.placements()

    async def late_in_the_log() -> bool:
        return "late" in replay(await read_events(mesh.nats_url)).actors

    assert await holds_within(late_placed, timeout=10), "the unacked request is delivered again after its ack wait"
    assert (await client.placements())["late"] == "n1"
    assert await holds_within(late_in_the_log), "the log holds the decision a moment after the leader's view"
    view = replay(await read_events(mesh.nats_url))
    assert view.actors["late"].status == "placed"
    assert view.nodes["n1"].free == {"CPU": 2.0}  # "before" and "late", each once
