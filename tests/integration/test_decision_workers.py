"""Decision workers (`CORRAL_DECISION_WORKERS`): several processes decide, the leading scheduler's applier checks and
appends. Every guarantee of the scheduler alone holds: durable before answered, each request decided once, no node
over-allocated, a deposed leader's decisions counting for nothing, every view equal to a replay of the log."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from functools import partial
from pathlib import Path

import nats.errors
import nats.js.errors
import pytest
from nats.aio.msg import Msg
from nats.js.api import ConsumerInfo

from schemas import ActorPlaced, ActorSubmitted, Pending, Placed, SchedulerElected, ScheduleRequest
from schemas import subjects as s
from schemas.commands import RemoveActor, SubmitActor
from schemas.proposals import Proposal, Proposals, Verdicts
from schemas.replies import Rejected
from services.client import Client, ConflictError, RejectedError
from services.core.errors import NotFoundError, UnavailableError
from services.core.state import replay
from services.local.mesh import Mesh
from services.runtime import refusals
from services.runtime.bus import Bus
from services.runtime.codec import decode, encode
from services.runtime.connection import sent
from services.runtime.elections import new_election, record_election
from services.runtime.runner import EXIT_LEASE_LOST
from services.runtime.settings import Settings
from tests.integration.conftest import holds_within, log_of, start_test_mesh, wait_ready
from tests.integration.in_flight import Timed
from tests.integration.log import read_events, stored_about
from tests.integration.probe import differs_from_replay
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

WORKERS = ("decider-1", "decider-2")


PATIENT_LEASE = {"CORRAL_LEASE_TTL": "12"}
FLOOD_LEASE = {"CORRAL_LEASE_TTL": "4"}
"""Long enough for a busy CI machine's scheduling delays, short against the seconds the floods once stalled a loop."""
"""A lease the scheduler keeps through seconds stopped (SIGSTOP) on a busy machine: a test pausing it waits for a
condition up to a third of it, not a fraction of the mesh's 1.5 s."""


@pytest.fixture
def mesh(request: pytest.FixtureRequest, tmp_path: Path, server_path: ServerPath) -> Iterator[Mesh]:
    """The mesh with two decision workers beside the scheduler (settings over the mesh's: parametrize it
    indirectly)."""
    settings = {"CORRAL_DECISION_WORKERS": str(len(WORKERS)), **getattr(request, "param", {})}
    running = start_test_mesh(tmp_path / "mesh", server_path, settings=settings)
    try:
        yield running
    finally:
        running.close()


@pytest.fixture
async def client(mesh: Mesh) -> AsyncIterator[Client]:
    """A client of the mesh, once every service answers."""
    async with Client(mesh.nats_url, timeout=10.0) as connected:
        await wait_ready(connected)
        yield connected


async def submit_all(
    client: Client, count: int, prefix: str = "a", pause: float = 0.0, timed: Timed | None = None
) -> list[object]:
    """`count` one-CPU submits sent at once (each `pause` seconds after the one before), each with its own key, timed
    in `timed`; each answer is checked to be stored in the log already (durable before answered)."""
    timed = timed or Timed()

    async def submit(index: int) -> object:
        await asyncio.sleep(index * pause)
        request = ScheduleRequest(f"{prefix}{index}", {"CPU": 1})
        sent = partial(client.submit, request, timeout=30.0, command_id=f"{prefix}{index}")
        decision = await timed.send(request.actor_id, sent)
        assert await stored_about(client.bus, request.actor_id), f"{request.actor_id} answered before stored"
        return decision

    return list(await asyncio.gather(*(submit(i) for i in range(count))))


async def placed_once(mesh: Mesh, count: int) -> dict[str, int]:
    """Check the log: no actor submitted or placed twice; the number of placements per node."""
    events = await read_events(mesh.nats_url)
    submitted = Counter(e.request.actor_id for e in events if isinstance(e, ActorSubmitted | ActorPlaced) and e.request)
    assert len(submitted) == count and set(submitted.values()) == {1}
    placements = Counter(e.actor_id for e in events if isinstance(e, ActorPlaced))
    assert set(placements.values()) <= {1}
    view = replay(events)
    assert all(free >= 0 for node in view.nodes.values() for free in node.free.values())
    return Counter(actor.node_id for actor in view.actors.values() if actor.node_id)


async def test_workers_decide_each_request_once_no_node_overfull_and_every_view_equals_a_replay(
    client: Client, mesh: Mesh
) -> None:
    """More requests than room, from many senders at once: each decided once, the room filled exactly."""
    for index in range(3):
        await client.register_node(f"n{index}", {"CPU": 10})
    decisions = await submit_all(client, 45)
    assert sum(isinstance(d, Placed) for d in decisions) == 30
    assert sum(isinstance(d, Pending) for d in decisions) == 15
    assert await placed_once(mesh, 45) == {"n0": 10, "n1": 10, "n2": 10}
    status = await client.status()
    assert {a.actor_id: a.node_id for a in status.actors if a.node_id} == {
        d.id: d.node_id for d in decisions if isinstance(d, Placed)
    }

    for service, processes in (("scheduler", 1), ("decider", len(WORKERS))):
        assert not (problem := await differs_from_replay(client.bus, service, processes)), problem


async def test_two_workers_proposing_the_last_room_get_one_placement_and_one_refusal(
    client: Client, mesh: Mesh
) -> None:
    """Two proposals decided against views with one slot left, for different actors on the same node: the applier
    accepts the first and refuses the second, whose worker decides it again (here: no room left, so pending)."""
    await client.register_node("n1", {"CPU": 1})
    await client.wait_ready(timeout=5)
    folded = await client.bus.last_sequence()

    async def propose(worker: str, actor_id: str, request_sequence: int) -> Verdicts:
        request = SubmitActor(request=ScheduleRequest(actor_id, {"CPU": 1}))
        proposals = Proposals(worker, folded, [Proposal(request, request_sequence, node_id="n1", prng=0)])
        reply = await client.bus.nc.request(s.PROPOSALS, encode(proposals), timeout=10)
        answer: Verdicts = decode(reply.data, Verdicts)
        return answer

    first, second = await asyncio.gather(propose("w1", "x", 10**9), propose("w2", "y", 10**9 + 1))
    replies = [first.verdicts[0].reply, second.verdicts[0].reply]
    assert sum(isinstance(r, Placed) and r.node_id == "n1" for r in replies) == 1
    assert replies.count(None) == 1  # refused: nothing of it stored
    events = await read_events(mesh.nats_url)
    assert [e.actor_id for e in events if isinstance(e, ActorPlaced)] in (["x"], ["y"])
    assert replay(events).nodes["n1"].free == {"CPU": 0.0}
    # the refused proposal, decided by its worker again on a view folded up to the verdict's sequence
    assert isinstance(await client.submit(ScheduleRequest("z", {"CPU": 1})), Pending)


@pytest.mark.parametrize("mesh", [PATIENT_LEASE], ids=["lease 12 s"], indirect=True)
async def test_killing_a_worker_mid_batch_loses_no_request_and_decides_nothing_twice(
    client: Client, mesh: Mesh
) -> None:
    """Each worker holds a request it proposed when one is killed: the applier (paused meanwhile) stores both
    proposals, one worker is never answered, and its request, delivered again to the other worker, is answered with
    the decision already stored."""
    for index in range(2):
        await client.register_node(f"n{index}", {"CPU": 40})

    async def consumer_has(check: Callable[[ConsumerInfo], bool]) -> bool:
        try:
            info = await client.bus.js.consumer_info(s.REQUESTS_STREAM, s.REQUESTS_CONSUMER)
        except nats.js.errors.NotFoundError:  # no worker has declared it yet (a slow start)
            return False
        return check(info)

    assert await holds_within(lambda: consumer_has(lambda info: (info.num_waiting or 0) >= len(WORKERS)), 15)
    scheduler = mesh.processes["scheduler"]
    scheduler.send_signal(signal.SIGSTOP)  # well within its lease
    try:
        stream = asyncio.ensure_future(submit_all(client, 20))
        patience = float(PATIENT_LEASE["CORRAL_LEASE_TTL"]) / 3
        assert await holds_within(lambda: consumer_has(lambda info: (info.num_ack_pending or 0) >= 2), patience)
        mesh.stop_service("decider-1", hard=True)
    finally:
        scheduler.send_signal(signal.SIGCONT)
    decisions = await asyncio.wait_for(stream, timeout=60)
    assert all(isinstance(d, Placed) for d in decisions)
    assert sum((await placed_once(mesh, 20)).values()) == 20
    # delivered more times than there are requests: the killed worker's request went out again
    delivered = (await client.bus.js.consumer_info(s.REQUESTS_STREAM, s.REQUESTS_CONSUMER)).delivered
    assert delivered is not None and delivered.consumer_seq > delivered.stream_seq


async def test_with_every_worker_gone_requests_wait_in_the_queue_and_a_worker_started_again_decides_them(
    client: Client, mesh: Mesh
) -> None:
    """The leader decides nothing itself while workers are configured: a request waits, stored, for a worker."""
    await client.register_node("n1", {"CPU": 4})
    for worker in WORKERS:
        mesh.stop_service(worker, hard=True)
    with pytest.raises(UnavailableError, match="no decision within"):
        await client.submit(ScheduleRequest("waits", {"CPU": 1}), timeout=1.0, command_id="waits")
    mesh.start_service("decider", instance=WORKERS[0])
    decision = await client.submit(ScheduleRequest("waits", {"CPU": 1}), timeout=20.0, command_id="waits")
    assert isinstance(decision, Placed) and decision.node_id == "n1"
    assert await placed_once(mesh, 1) == {"n1": 1}


async def test_killing_the_leading_scheduler_mid_stream_loses_nothing_and_the_standby_applies(
    client: Client, mesh: Mesh
) -> None:
    """The applier killed with proposals in flight: the workers' requests go again to the standby's applier,
    which answers a request its predecessor decided with that decision."""
    mesh.start_service("scheduler", instance="standby")
    for index in range(4):
        await client.register_node(f"n{index}", {"CPU": 40})
    timed = Timed()
    stream = asyncio.ensure_future(submit_all(client, 100, pause=0.01, timed=timed))
    killed = await timed.flowing()
    mesh.stop_service("scheduler", hard=True)
    decisions = await asyncio.wait_for(stream, timeout=60)
    assert timed.in_flight_at(killed), "no request was in flight at the kill"
    assert all(isinstance(d, Placed) for d in decisions)
    assert "won the lease" in log_of(mesh, "standby")
    assert sum((await placed_once(mesh, 100)).values()) == 100
    placed_now = {a.actor_id: a.node_id for a in (await client.status()).actors}
    assert all(placed_now[d.id] == d.node_id for d in decisions if isinstance(d, Placed))


async def test_a_deposed_leaders_applier_answers_nothing_and_the_next_one_decides(client: Client, mesh: Mesh) -> None:
    """A newer election lands in the log behind the leader's back: the proposals it gets count for no view, so no
    worker is answered; the leader exits and the next scheduler's applier decides the request once."""
    await client.register_node("n1", {"CPU": 4})
    await client.submit(ScheduleRequest("before", {"CPU": 1}))
    usurper = await Bus.connect(Settings(nats_url=mesh.nats_url), "test-usurper")
    try:
        lease = await usurper.lease_bucket()
        held = await lease.get(s.SCHEDULER_LEASE_KEY)
        epoch = await lease.update(s.SCHEDULER_LEASE_KEY, held.value or b"", last=held.revision)
        elected = new_election(epoch, "usurper")
        await record_election(usurper.js, elected)
        await usurper.append([elected])
    finally:
        await usurper.close()

    with pytest.raises(UnavailableError, match="no decision within"):
        await client.submit(ScheduleRequest("late", {"CPU": 1}), timeout=1.0)
    assert await asyncio.to_thread(mesh.processes["scheduler"].wait, 10) == EXIT_LEASE_LOST
    assert "a newer scheduler was elected" in log_of(mesh, "scheduler")
    assert "snapshot saved" not in log_of(mesh, "scheduler")

    mesh.start_service("scheduler", instance="next")
    await wait_ready(client)

    async def late_in_the_log() -> bool:
        return "late" in replay(await read_events(mesh.nats_url)).actors

    assert await holds_within(late_in_the_log, timeout=15), "the unacked request is delivered again and decided"
    view = replay(await read_events(mesh.nats_url))
    assert view.actors["late"].status == "placed"
    assert view.nodes["n1"].free == {"CPU": 2.0}  # "before" and "late", each once


async def test_bad_requests_through_the_workers_are_refused_or_set_aside_and_change_nothing(
    client: Client, mesh: Mesh
) -> None:
    """Garbage on the request stream goes to dead letters; a request the core refuses is rejected naming the field
    (the workers keep serving); another request for a live id is a conflict naming the field; the same request again
    returns the decision; nothing changes."""
    await client.register_node("n1", {"CPU": 2})
    await client.bus.js.publish(s.SCHEDULE, b"\x00garbage")
    with pytest.raises(RejectedError, match="label_selector"):
        await client.submit(ScheduleRequest("bad", {"CPU": 1}, label_selector={"zone": "in(a"}))
    first = await client.submit(ScheduleRequest("a1", {"CPU": 1}))
    assert isinstance(first, Placed)
    with pytest.raises(ConflictError, match="resources"):
        await client.submit(ScheduleRequest("a1", {"CPU": 2}))
    assert await client.submit(ScheduleRequest("a1", {"CPU": 1})) == first
    info = await client.bus.js.stream_info(s.DEAD_LETTERS_STREAM)
    assert info.state.messages >= 1
    assert await placed_once(mesh, 1) == {"n1": 1}


async def test_a_forged_proposal_naming_a_requests_sequence_does_not_answer_that_request(
    client: Client, mesh: Mesh
) -> None:
    """Someone on the bus proposes another request under the sequence the next real request will get: the applier
    decides the forgery on its own merits, and the real request is still decided as itself (its answer was not
    taken from the forgery's)."""
    await client.register_node("n1", {"CPU": 4})
    await client.wait_ready(timeout=5)
    info = await client.bus.js.stream_info(s.REQUESTS_STREAM)
    forged = SubmitActor(request=ScheduleRequest("forged", {"CPU": 1}))
    batch = Proposals("intruder", await client.bus.last_sequence(), [Proposal(forged, info.state.last_seq + 1)])
    await client.bus.nc.request(s.PROPOSALS, encode(batch), timeout=10)
    decision = await client.submit(ScheduleRequest("real", {"CPU": 1}), timeout=20.0)
    assert isinstance(decision, Placed)
    events = await read_events(mesh.nats_url)
    assert "real" in {e.actor_id for e in events if isinstance(e, ActorPlaced)}


async def test_a_batch_naming_a_corral_or_jetstream_subject_as_its_reply_is_not_answered_there(
    client: Client, mesh: Mesh
) -> None:
    """Someone on the bus sends a batch with an event subject (or a JetStream API call) as its reply subject: the
    applier decides the batch but publishes nothing there (the verdicts landed in the event log before; found by
    `test_fuzz_proposals.py`)."""
    await client.register_node("n1", {"CPU": 4})
    await client.wait_ready(timeout=5)
    targets = (s.event_subject(s.ACTOR, "x"), f"$JS.API.STREAM.PURGE.{s.EVENTS_STREAM}")
    seen: list[str] = []

    async def record(msg: Msg) -> None:
        seen.append(msg.subject)

    for target in targets:
        await client.bus.nc.subscribe(target, cb=record)
    before = await client.bus.last_sequence()
    removal = Proposals("intruder", before, [Proposal(RemoveActor(actor_id="nobody"), 10**9)])
    for target in targets:
        await client.bus.nc.publish(s.PROPOSALS, encode(removal), reply=target)
    answer = await client.bus.nc.request(s.PROPOSALS, encode(removal), timeout=10)  # applied after both
    assert isinstance(decode(answer.data, Verdicts).verdicts[0].reply, Rejected)
    await sent(client.bus.nc)
    assert seen == []
    assert await client.bus.last_sequence() == before
    assert isinstance(await client.submit(ScheduleRequest("after", {"CPU": 1}), timeout=20.0), Placed)


KEYED_SEQUENCE = 424_242
"""The request sequence a keyed proposal names (no request is stored there: the applier keeps what it is told)."""


async def test_a_batch_whose_verdicts_would_pass_the_payload_limit_is_answered_through_the_inboxes(
    client: Client, mesh: Mesh
) -> None:
    """Thousands of tiny proposals in one batch, each refused with a longer rejection: the applier sends each reply
    to its proposal's inbox itself and answers the batch with verdicts marked sent, within the payload limit (the
    scheduler exited on the answer before: maximum payload exceeded; found by `test_fuzz_proposals.py`). A refusal
    of a request with an idempotency key is kept for its resends first, as the worker would have kept it."""
    await client.wait_ready(timeout=5)
    inbox = client.bus.nc.new_inbox()
    replies = await client.bus.nc.subscribe(inbox)
    tiny = b'{"request":{"kind":"fail_actor","actor_id":"g"},"request_sequence":%d}'
    last = b'{"request":{"kind":"fail_actor","actor_id":"g","command_id":"k"},"request_sequence":%d,"inbox":"%s"}' % (
        KEYED_SEQUENCE,
        inbox.encode(),
    )
    count = (client.bus.nc.max_payload - len(last) - 100) // len(tiny % 10**6)
    proposals = b",".join([*(tiny % (10**5 + index) for index in range(count)), last])
    batch = b'{"worker":"w","folded":0,"proposals":[%s]}' % proposals
    answer = await client.bus.nc.request(s.PROPOSALS, batch, timeout=20)
    verdicts = decode(answer.data, Verdicts).verdicts
    assert len(verdicts) == count + 1 and all(v.sent and v.reply is None for v in verdicts)
    assert "no such live actor" in decode((await replies.next_msg(timeout=10)).data, Rejected).error
    kept = await refusals.kept(client.bus.js, KEYED_SEQUENCE, client.bus.nc.max_payload)
    assert kept is not None and "no such live actor" in kept.error
    assert await refusals.kept(client.bus.js, 10**5, client.bus.nc.max_payload) is None  # no key: nothing kept
    assert mesh.processes["scheduler"].poll() is None


async def test_a_batch_with_a_negative_folded_sequence_or_generator_state_is_refused_whole(
    client: Client, mesh: Mesh
) -> None:
    """A forged batch claiming a view folded up to -1, or a proposal with a generator state below -1 (no worker
    sends either), is unreadable: nothing is stored (before, the placement was stored with them, and `corral why
    placed` explained it from a state no generator had); the applier goes on deciding."""
    await client.register_node("n1", {"CPU": 4})
    await client.wait_ready(timeout=5)
    before = await client.bus.last_sequence()
    forged = SubmitActor(request=ScheduleRequest("forged", {"CPU": 1}))
    batches = (
        Proposals("intruder", -1, [Proposal(forged, 10**9, node_id="n1", prng=0)]),
        Proposals("intruder", before, [Proposal(forged, 10**9, node_id="n1", prng=-7)]),
    )
    for batch in batches:
        with contextlib.suppress(nats.errors.TimeoutError):
            await client.bus.nc.request(s.PROPOSALS, encode(batch), timeout=1.0)
    assert await client.bus.last_sequence() == before
    assert isinstance(await client.submit(ScheduleRequest("after", {"CPU": 1}), timeout=20.0), Placed)
    assert "forged" not in {e.actor_id for e in await read_events(mesh.nats_url) if isinstance(e, ActorPlaced)}


@pytest.mark.scale
@pytest.mark.parametrize("mesh", [FLOOD_LEASE], ids=["lease 4 s"], indirect=True)
async def test_floods_of_proposals_at_once_leave_the_leader_elected_and_real_requests_answered(
    client: Client, mesh: Mesh
) -> None:
    """64 batches of 1 MB of tiny refused proposals sent at once (about 800,000 proposals): the applier decodes
    them one at a time and decides them in rounds, yielding between, so the leader keeps renewing its lease and a
    real request sent beside them is answered. Before, it decided them all in one go and stalled its event loop
    for seconds; then it decoded all 64 before the first round (0.7 s here, more on a slower machine: CI lost the
    lease, with the tests' 1.5 s TTL, and lost it again under four busy test workers: this test's lease is 4 s)."""
    await client.register_node("n1", {"CPU": 4})
    await client.wait_ready(timeout=5)
    mesh.start_service("scheduler", instance="standby")

    async def standing_by() -> bool:
        return "standing by" in log_of(mesh, "standby")

    assert await holds_within(standing_by, timeout=10)
    scheduler = mesh.processes["scheduler"]
    elections = sum(isinstance(e, SchedulerElected) for e in await read_events(mesh.nats_url))
    tiny = b'{"request":{"kind":"remove_actor","actor_id":"ghost"},"request_sequence":%d}'
    count = (client.bus.nc.max_payload - 100) // (len(tiny % 10**7) + 1)
    floods = [
        b'{"worker":"flood","folded":0,"proposals":[%s]}'
        % b",".join(tiny % (10**7 + 10**6 * flood + index) for index in range(count))
        for flood in range(64)
    ]
    for flood in floods:
        await client.bus.nc.publish(s.PROPOSALS, flood)
    await sent(client.bus.nc)
    assert isinstance(await client.submit(ScheduleRequest("real", {"CPU": 1}), timeout=60.0), Placed)
    lease_ttl = float(FLOOD_LEASE["CORRAL_LEASE_TTL"])
    await asyncio.sleep(2 * lease_ttl)  # a lease lost to the floods would have lapsed by now
    assert mesh.processes["scheduler"] is scheduler and scheduler.poll() is None, log_of(mesh, "scheduler")[-2000:]
    assert sum(isinstance(e, SchedulerElected) for e in await read_events(mesh.nats_url)) == elections
    assert "won the lease" not in log_of(mesh, "standby")


async def test_a_refusal_through_the_workers_is_kept_for_another_clients_resend(client: Client, mesh: Mesh) -> None:
    """A worker keeps the refusal it answers before it acks: a resend of the same key from another client process
    (a duplicate the stream delivers no more) is refused alike, not left without an answer."""
    request = ScheduleRequest("a1", {"CPU": 1}, vcluster_id="vc-gone")
    with pytest.raises(NotFoundError, match="no such virtual cluster"):
        await client.submit(request, command_id="submit-a1")
    async with Client(mesh.nats_url) as other:
        with pytest.raises(NotFoundError, match="no such virtual cluster"):
            await other.submit(request, command_id="submit-a1")


async def test_different_requests_under_one_key_through_the_workers_store_one_and_refuse_the_others(
    client: Client, mesh: Mesh
) -> None:
    """20 different requests sent at once under one key, decided by the workers: one is stored and placed, the 19
    others are conflicts naming the key; once it is acked, another client's resend of the stored one gets its
    decision (the worker kept the request before its ack), and of another one, a conflict."""
    await client.register_node("n1", {"CPU": 64})
    requests = [ScheduleRequest(f"a{index}", {"CPU": 1 + index % 3}) for index in range(20)]
    answers = await asyncio.gather(
        *(client.submit(request, timeout=10.0, command_id="k1") for request in requests), return_exceptions=True
    )
    placed = [answer for answer in answers if isinstance(answer, Placed)]
    conflicts = [answer for answer in answers if isinstance(answer, ConflictError)]
    assert len(placed) == 1 and len(conflicts) == 19, answers
    stored = next(r for r, answer in zip(requests, answers, strict=True) if isinstance(answer, Placed))
    await placed_once(mesh, 1)
    async with Client(mesh.nats_url) as other:
        assert await other.submit(stored, command_id="k1") == placed[0]
        with pytest.raises(ConflictError, match=r"command_id 'k1': already used .*actor_id: '"):
            await other.submit(ScheduleRequest("b", {"CPU": 1}), command_id="k1")
