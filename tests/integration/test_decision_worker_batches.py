"""Request batches (`corral.req.batch`) through decision workers: each request of a batch proposed in its place and
decided in its order, the batch answered by one `BatchReply` once all are stored, a batch delivered again answered as
the first time, nothing decided twice, no node over-allocated, every view equal to a replay of the log."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter

import msgspec
import pytest

from schemas import ActorPlaced, ActorRemoved, Pending, Placed, ScheduleRequest
from schemas import subjects as s
from schemas.commands import RemoveActor, RequestBatch, SchedulerRequest, SubmitActor
from schemas.proposals import Proposal, Proposals, Verdicts
from schemas.replies import Accepted, BatchReply, Rejected
from services.client import Client
from services.core.state import replay
from services.local.mesh import Mesh
from services.runtime.codec import decode, encode
from tests.integration.batches import sent_raw
from tests.integration.conftest import holds_within
from tests.integration.log import read_events
from tests.integration.probe import differs_from_replay
from tests.integration.test_decision_workers import PATIENT_LEASE, WORKERS, client, mesh

__all__ = ["client", "mesh"]  # the fixtures: a mesh with two decision workers and its client

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_a_batch_through_the_workers_is_decided_in_order_stored_and_answered_together(
    client: Client, mesh: Mesh
) -> None:
    """Ten one-CPU submits on eight CPUs, a bad selector, a removal, and a submit then a removal of one actor, in one
    batch: answered in order (eight placed, two pending, the refusal naming its rule, the removals accepted, the
    last actor removed after its submit); every placement answered is in the log, no node over its capacity, and the
    scheduler's and each worker's view equal a replay of the log."""
    await client.register_node("n0", {"CPU": 4})
    await client.register_node("n1", {"CPU": 4})
    submits = [SubmitActor(request=ScheduleRequest(f"b{i}", {"CPU": 1})) for i in range(10)]
    bad = SubmitActor(request=ScheduleRequest("bad", {"CPU": 1}, label_selector={"zone": "in()"}))
    last: list[SchedulerRequest] = [SubmitActor(request=ScheduleRequest("x", {"CPU": 1})), RemoveActor(actor_id="x")]
    answers = await client.send_batch([*submits, bad, RemoveActor(actor_id="b0"), *last], timeout=20.0)
    kinds = [Placed] * 8 + [Pending] * 2 + [Rejected, Accepted, Pending, Accepted]
    assert [type(answer) for answer in answers] == kinds, answers
    assert [a.id for a in answers if isinstance(a, Placed | Pending)] == [*(f"b{i}" for i in range(10)), "x"]
    refused = answers[10]
    assert isinstance(refused, Rejected) and "zone" in refused.error
    events = await read_events(mesh.nats_url)
    view = replay(events)
    placed = {a.id: a.node_id for a in answers if isinstance(a, Placed) and a.id != "b0"}
    assert {actor_id: view.actors[actor_id].node_id for actor_id in placed} == placed
    assert "b0" not in view.actors and "x" not in view.actors
    assert all(free >= 0 for node in view.nodes.values() for free in node.free.values())
    assert Counter(e.actor_id for e in events if isinstance(e, ActorRemoved)) == {"b0": 1, "x": 1}
    for service, processes in (("scheduler", 1), ("decider", len(WORKERS))):
        assert not (problem := await differs_from_replay(client.bus, service, processes)), problem


@pytest.mark.parametrize("mesh", [PATIENT_LEASE], ids=["lease 12 s"], indirect=True)
async def test_a_batch_delivered_again_while_the_applier_stalls_is_decided_once_and_answered_as_the_first_time(
    client: Client, mesh: Mesh
) -> None:
    """The applier is paused while a batch waits for it: its worker gives up, the batch goes out again (to either
    worker) and is proposed again, several times; the applier decides it once and answers each copy from memory: the
    removal inside is accepted (decided again it would be refused as unknown), the submits placed once each."""
    await client.register_node("n0", {"CPU": 8})
    await client.submit(ScheduleRequest("r", {"CPU": 1}))
    batch: list[SchedulerRequest] = [
        RemoveActor(actor_id="r"),
        *(SubmitActor(request=ScheduleRequest(f"c{i}", {"CPU": 1})) for i in range(5)),
    ]
    scheduler = mesh.processes["scheduler"]
    before = (await client.bus.js.consumer_info(s.REQUESTS_STREAM, s.REQUESTS_CONSUMER)).delivered.consumer_seq or 0

    async def delivered_again() -> bool:
        info = await client.bus.js.consumer_info(s.REQUESTS_STREAM, s.REQUESTS_CONSUMER)
        return (info.delivered.consumer_seq or 0) >= before + 3  # the batch delivered at least three times

    scheduler.send_signal(signal.SIGSTOP)
    try:
        sending = asyncio.ensure_future(client.send_batch(batch, timeout=40.0))
        assert await holds_within(delivered_again, float(PATIENT_LEASE["CORRAL_LEASE_TTL"]) / 2)
    finally:
        scheduler.send_signal(signal.SIGCONT)
    answers = await asyncio.wait_for(sending, timeout=45)
    assert isinstance(answers[0], Accepted) and answers[0].message == "actor r removed", answers
    assert all(isinstance(answer, Placed) for answer in answers[1:]), answers
    events = await read_events(mesh.nats_url)
    assert [e.actor_id for e in events if isinstance(e, ActorRemoved)] == ["r"]
    placements = Counter(e.actor_id for e in events if isinstance(e, ActorPlaced))
    assert placements == {"r": 1, **{f"c{i}": 1 for i in range(5)}}
    assert replay(events).nodes["n0"].free == {"CPU": 3.0}


async def test_the_same_batch_proposed_twice_and_sent_again_decides_nothing_twice(client: Client, mesh: Mesh) -> None:
    """The same proposals of a batch (a removal, then a submit of the same actor) proposed twice to the applier get
    the same verdicts and store nothing more; the same submits sent again as another batch message answer the same
    placements and store nothing."""
    await client.register_node("n0", {"CPU": 4})
    await client.submit(ScheduleRequest("y", {"CPU": 1}))
    await client.wait_ready(timeout=5)
    sequence = 10**9
    items: list[SchedulerRequest] = [RemoveActor(actor_id="y"), SubmitActor(request=ScheduleRequest("y", {"CPU": 2}))]
    proposals = [Proposal(request, sequence, place=place) for place, request in enumerate(items, start=1)]

    async def propose() -> Verdicts:
        batch = Proposals("w", await client.bus.last_sequence(), proposals)
        answer: Verdicts = decode((await client.bus.nc.request(s.PROPOSALS, encode(batch), timeout=10)).data, Verdicts)
        return answer

    first = (await propose()).verdicts
    assert first[0].reply == Accepted(message="actor y removed") and isinstance(first[1].reply, Placed)
    stored = await client.bus.last_sequence()
    assert (await propose()).verdicts == first
    assert await client.bus.last_sequence() == stored

    submits = [ScheduleRequest(f"d{i}", {"CPU": 1}) for i in range(2)]
    placed = await client.submit_many(submits, timeout=20.0)
    assert all(isinstance(answer, Placed) for answer in placed), placed
    stored = await client.bus.last_sequence()
    again = await sent_raw(
        client, msgspec.json.encode(RequestBatch(requests=[SubmitActor(request=r) for r in submits]))
    )
    assert isinstance(again, BatchReply) and again.replies == placed
    assert await client.bus.last_sequence() == stored
    keyed = await sent_raw(
        client,
        msgspec.json.encode(RequestBatch(requests=[SubmitActor(request=submits[0])])),
        headers={s.KEY_HEADER: "k"},
    )
    assert isinstance(keyed, Rejected) and "a batch carries no idempotency key" in keyed.error, keyed
    assert await client.bus.last_sequence() == stored
    view = replay(await read_events(mesh.nats_url))
    assert view.nodes["n0"].free == {"CPU": 0.0}  # y (2 CPUs, once) and d0, d1
