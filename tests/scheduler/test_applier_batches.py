"""The applier and the requests of batch messages (`Proposal.place` from 1), with the real view, writer and core on a
fake bus: their replies stay in the verdicts (never sent to an inbox), a refused one holds back the later ones of its
batch, each is remembered under its sequence and place, and an answer over the payload limit is made to fit."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import cast

import pytest

from schemas import AnyEvent, NodeRegistered, Pending, Placed, SchedulerElected
from schemas.commands import RemoveActor, SchedulerRequest, SubmitActor
from schemas.proposals import Proposal, Proposals, Verdict, Verdicts
from schemas.replies import Accepted, Rejected, RequestReply
from schemas.requests import ScheduleRequest
from services.runtime.codec import decode, encode
from services.runtime.pages import Pager
from services.scheduler import app
from services.scheduler import applier as applier_module
from services.scheduler.app import Leader, Writer
from services.scheduler.applier import Applier, fitted
from services.scheduler.view import SchedulerView
from tests.scheduler.fake_bus import FakeBus, fake_shell

Sent = list[tuple[str, bytes]]


@pytest.fixture(autouse=True)
def elections_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Election records dropped (the bucket is not faked)."""

    async def record(_js: object, _elected: SchedulerElected, *, replicas: int = 1) -> None:
        return None

    monkeypatch.setattr(app, "record_election", record)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Sent:
    """What the applier publishes: (subject, data), its answers to the workers and its replies to the inboxes."""
    published: Sent = []

    async def send_reply(_bus: object, _subject: str, inbox: str, data: bytes) -> None:
        published.append((inbox, data))

    monkeypatch.setattr(applier_module, "send_reply", send_reply)
    return published


class Leading:
    """A leading scheduler on a fake log, with its applier (the bus's payload limit `max_payload`)."""

    def __init__(self, log: list[AnyEvent], max_payload: int = 1 << 20) -> None:
        self.log = log
        self.view = SchedulerView(seed=7, rare_resources=())
        shell, bus, follower = fake_shell(log, view=self.view)
        self.bus: FakeBus = bus
        bus.nc = SimpleNamespace(max_payload=max_payload)  # type: ignore[attr-defined]
        shell.pager = cast(Pager, SimpleNamespace(fit=encode))
        writer = Writer(shell, self.view)
        asyncio.run(follower.caught_up())
        asyncio.run(Leader(shell, self.view, writer, "a").take_over(1))

        async def elected(_appended_from: int) -> None:
            return None

        async def guarded(
            _subject: str, _data: object, decide: Callable[[], RequestReply | None], _sequence: object
        ) -> tuple[RequestReply | None, bool]:
            return decide(), False

        self.applier = Applier(shell, self.view, writer, elected, guarded)

    def propose(self, sent: Sent, *proposals: Proposal) -> list[Verdict]:
        """The verdicts the worker gets for `proposals` sent as one batch."""
        msg = SimpleNamespace(reply="worker-inbox")
        asyncio.run(self.applier.apply([(msg, Proposals("w", self.view.sequence, list(proposals)))]))  # type: ignore[list-item]
        inbox, data = sent.pop()
        assert inbox == "worker-inbox"
        verdicts: Verdicts = decode(data, Verdicts)
        return verdicts.verdicts


def node(node_id: str, cpu: float) -> NodeRegistered:
    return NodeRegistered(node_id=node_id, resources={"CPU": cpu}, labels={}, event_id=f"labels-{node_id}")


def submit(actor_id: str, cpu: float = 1) -> SubmitActor:
    return SubmitActor(request=ScheduleRequest(actor_id, {"CPU": cpu}))


def item(request: SchedulerRequest, place: int, sequence: int = 5, node_id: str = "") -> Proposal:
    """A request of the batch message at `sequence`, at `place`."""
    return Proposal(request, sequence, node_id=node_id, prng=0 if node_id else -1, place=place)


def test_a_batchs_replies_stay_in_its_verdicts_and_a_pending_one_is_not_sent_to_an_inbox(sent: Sent) -> None:
    """Three submits of one batch on two CPUs: placed, placed, pending, each in its verdict; a request alone that
    waits is still answered at its inbox by the applier and marked sent, as before batches."""
    leading = Leading([node("n1", 2)])
    alone = Proposal(submit("d"), 6, inbox="client-inbox")
    verdicts = leading.propose(sent, item(submit("a"), 1), item(submit("b"), 2), item(submit("c"), 3), alone)
    assert [type(v.reply) for v in verdicts[:3]] == [Placed, Placed, Pending]
    assert not any(v.sent for v in verdicts[:3])
    assert verdicts[3] == Verdict(sent=True)
    assert [inbox for inbox, _data in sent] == ["client-inbox"]


def test_a_refused_request_of_a_batch_holds_back_its_batchs_later_ones_and_nothing_else(sent: Sent) -> None:
    """The worker chose a node without room for the batch's first request, a submit: it is refused, and the batch's
    removal of the same actor after it is refused undecided (decided first, it would be refused as unknown and the
    submit then placed); another batch's request and a request alone are decided. Proposed again in order, the
    submit waits and the removal removes it."""
    leading = Leading([node("n1", 2)])
    first = leading.propose(
        sent,
        item(submit("x", 3), 1, node_id="n1"),
        item(RemoveActor(actor_id="x"), 2),
        item(submit("y"), 1, sequence=8),
        Proposal(submit("z"), 9),
    )
    assert first[0] == Verdict() and first[1] == Verdict()
    assert isinstance(first[2].reply, Placed) and isinstance(first[3].reply, Placed)
    assert "x" not in leading.view.cluster.view.actors
    again = leading.propose(sent, item(submit("x", 3), 1), item(RemoveActor(actor_id="x"), 2))
    assert isinstance(again[0].reply, Pending)
    assert again[1].reply == Accepted(message="actor x removed")


def test_a_batch_proposed_again_gets_each_requests_first_verdict_and_changes_nothing(sent: Sent) -> None:
    """A batch message delivered again (its worker gave up waiting): each request is answered from memory under its
    sequence and place, so a removal before a submit of the same actor is not decided again (it would remove the
    actor the submit placed)."""
    leading = Leading([node("n1", 2)])
    batch = (item(RemoveActor(actor_id="y"), 1), item(submit("y"), 2))
    first = leading.propose(sent, *batch)
    assert isinstance(first[0].reply, Rejected) and isinstance(first[1].reply, Placed)
    stored = len(leading.log)
    assert leading.propose(sent, *batch) == first
    assert len(leading.log) == stored
    assert "y" in leading.view.cluster.view.actors


def test_an_answer_over_the_payload_limit_shortens_a_batchs_pendings_and_sends_a_lone_request_s_reply(
    sent: Sent,
) -> None:
    """Ten pending submits of a batch, each naming 300 nodes, pass a 64 KB payload limit: the applier answers within
    it, each Pending's node lists shortened (its counts kept) and still in its verdict; a pending request alone is
    sent to its inbox, as before."""
    limit = 64 * 1024
    leading = Leading([node(f"node-with-a-rather-long-name-{index:04}", 1) for index in range(300)], limit)
    alone = Proposal(submit("alone", 2), 7, inbox="client-inbox")
    leading.propose(sent, alone)  # answered at its inbox when alone as well: a long Pending
    assert [inbox for inbox, _data in sent] == ["client-inbox"]
    sent.clear()
    msg = SimpleNamespace(reply="worker-inbox")
    batch = [item(submit(f"big{index}", 2), index + 1) for index in range(10)]
    proposals = Proposals("w", leading.view.sequence, [*batch, Proposal(submit("alone2", 2), 8, inbox="client-inbox")])
    asyncio.run(leading.applier.apply([(msg, proposals)]))  # type: ignore[list-item]
    (answer,) = [data for inbox, data in sent if inbox == "worker-inbox"]
    assert len(answer) <= limit
    verdicts = decode(answer, Verdicts).verdicts
    pendings = [v.reply for v in verdicts[:10]]
    assert all(isinstance(p, Pending) and p.reasons == {"Insufficient CPU": 300} for p in pendings), pendings
    assert all(0 < len(p.nodes_by_reason["Insufficient CPU"]) < 300 for p in pendings if isinstance(p, Pending))
    assert verdicts[10] == Verdict(sent=True)
    assert [inbox for inbox, _data in sent].count("client-inbox") == 1


def test_a_batchs_replies_too_long_even_shortened_are_each_a_short_rejection_naming_the_limit() -> None:
    """Rejections of a batch's requests that no shortening can fit: each becomes a rejection naming the limit, so the
    answer fits; a verdict of a request alone is left as it is."""
    long = Verdict(Rejected("x" * 10_000))
    proposals = [item(RemoveActor(actor_id="a"), place) for place in range(1, 11)] + [Proposal(submit("a"), 9)]
    answer = Verdicts(3, [long] * 10 + [Verdict(sent=True)])
    data = fitted(proposals, answer, 20_000)
    assert len(data) <= 20_000
    verdicts = decode(data, Verdicts)
    assert verdicts.sequence == 3 and verdicts.verdicts[10] == Verdict(sent=True)
    assert all(
        isinstance(v.reply, Rejected) and "payload limit of 20000 bytes" in v.reply.error
        for v in verdicts.verdicts[:10]
    )
