"""The scheduler's writer and leader on a fake bus (`fake_bus`): elections, appends, echoes, failures and deposition,
with the real view and core, and no server."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import cast

import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

from schemas import ActorPlaced, AnyEvent, NodeDied, NodeRegistered, Pending, Placed, SchedulerElected
from schemas.commands import SubmitActor
from schemas.requests import ScheduleRequest
from services.runtime.elections import new_election
from services.runtime.runner import ServiceExit
from services.runtime.service import Shell
from services.scheduler import app
from services.scheduler.app import Appended, Leader, Writer, _answer_in_order, _check_still_elected
from services.scheduler.handlers import handle
from services.scheduler.view import SchedulerView
from tests.scheduler.fake_bus import FakeBus, FakeFollower, fake_shell

Scheduler = tuple[SchedulerView, Writer, Leader, FakeBus, FakeFollower]


@pytest.fixture(autouse=True)
def elections_recorded(monkeypatch: pytest.MonkeyPatch) -> list[SchedulerElected]:
    """Election records kept in a list instead of the bucket (the log reader's check of them is not faked)."""
    recorded: list[SchedulerElected] = []

    async def record(_js: object, elected: SchedulerElected, *, replicas: int = 1) -> None:
        recorded.append(elected)

    monkeypatch.setattr(app, "record_election", record)
    return recorded


def scheduler(log: list[AnyEvent], instance: str = "a") -> Scheduler:
    """A scheduler instance on `log`, following it (not leading yet)."""
    view = SchedulerView(seed=7, rare_resources=())
    shell, bus, follower = fake_shell(log, view)
    writer = Writer(shell, view)
    return view, writer, Leader(shell, view, writer, instance), bus, follower


def leading(log: list[AnyEvent], instance: str = "a", epoch: int = 1) -> Scheduler:
    """A scheduler instance on `log` that caught up and leads under `epoch`."""
    found = scheduler(log, instance)
    _view, _writer, leader, _bus, follower = found
    asyncio.run(follower.caught_up())
    asyncio.run(leader.take_over(epoch))
    return found


def node(node_id: str, cpu: float = 4) -> NodeRegistered:
    return NodeRegistered(node_id=node_id, resources={"CPU": cpu}, labels={}, event_id=f"labels-{node_id}")


def submit(view: SchedulerView, actor_id: str, cpu: float = 1, restarts: int = 0) -> object:
    request = ScheduleRequest(actor_id, {"CPU": cpu}, max_restarts=restarts)
    return handle(view, SubmitActor(request=request))


def test_a_leader_appends_its_election_then_its_decisions_and_skips_their_echo(
    elections_recorded: list[SchedulerElected],
) -> None:
    log: list[AnyEvent] = [node("n1")]
    view, writer, leader, _bus, follower = leading(log)
    assert [type(event) for event in log] == [NodeRegistered, SchedulerElected]
    assert elections_recorded == [log[1]], "the record is written before the election is appended"
    assert view.leading and leader.elected_at == 2

    reply = submit(view, "a1")
    assert isinstance(reply, Placed) and reply.node_id == "n1"
    assert not writer.all_stored_and_folded(), "decided but not appended: no snapshot may hold it"
    first = asyncio.run(writer.flush())
    assert first == 3 and isinstance(log[-1], ActorPlaced) and log[-1].epoch == 1
    assert not writer.all_stored_and_folded(), "appended but not read back"
    asyncio.run(follower.caught_up())
    assert writer.all_stored_and_folded()

    standby, *_rest, standby_follower = scheduler(log, "b")
    asyncio.run(standby_follower.caught_up())
    assert standby.digest() == view.digest(), "a standby folding the log holds what the leader decided"


def test_a_new_leader_places_what_its_predecessor_left_waiting_right_after_its_election() -> None:
    log: list[AnyEvent] = [node("n1", cpu=1)]
    first, first_writer, *_rest = leading(log, "a")
    assert isinstance(submit(first, "a1"), Placed)
    assert isinstance(submit(first, "a2"), Pending)
    asyncio.run(first_writer.flush())
    log.append(node("n2", cpu=1))  # the first leader dies before it reacts

    second, second_writer, second_leader, _bus, second_follower = scheduler(log, "b")
    asyncio.run(second_follower.caught_up())
    assert not second_writer.all_stored_and_folded() or not second.leading
    asyncio.run(second_leader.take_over(2))
    placed = [event for event in log if isinstance(event, ActorPlaced) and event.actor_id == "a2"]
    assert [(event.node_id, event.epoch) for event in placed] == [("n2", 2)]
    assert isinstance(log[log.index(placed[0]) - 1], SchedulerElected), "placed at once after the election"


def test_an_append_never_confirmed_keeps_snapshots_off_and_ends_the_leadership() -> None:
    log: list[AnyEvent] = [node("n1")]
    view, writer, leader, bus, follower = leading(log)
    submit(view, "a1")
    bus.failing = TimeoutError("no ack")
    with pytest.raises(TimeoutError):
        asyncio.run(writer.flush())
    bus.failing = None
    asyncio.run(follower.caught_up())
    assert not writer.all_stored_and_folded(), "the view holds a decision the log may not"
    with pytest.raises(ServiceExit, match="never confirmed"):
        asyncio.run(leader.take_over(2))


def test_an_append_answered_at_folded_sequences_checks_which_log_it_went_to() -> None:
    log: list[AnyEvent] = [node("n1")]
    view, writer, _leader, bus, follower = leading(log)
    submit(view, "a1")
    bus.stored_at = [1, 2]  # a repeat of an append whose ack was lost, or a log made again
    asyncio.run(writer.flush())
    assert follower.log_checks == 1


def test_an_append_whose_echo_is_folded_before_its_ack_is_not_taken_for_another_log() -> None:
    log: list[AnyEvent] = [node("n1")]
    view, writer, _leader, bus, follower = leading(log)
    submit(view, "a1")
    bus.before_ack = lambda: follower.fold_to(len(log))  # the follower reads the echo before the ack arrives
    first = asyncio.run(writer.flush())
    assert view.sequence == first == len(log), "the echo was folded before the append returned"
    assert follower.log_checks == 0, "a JetStream request on every batch would sit on the decision path"
    assert writer.all_stored_and_folded()


def test_reactions_to_another_service_s_event_are_flagged_for_the_writer() -> None:
    log: list[AnyEvent] = [node("n1"), node("n2")]
    view, writer, _leader, _bus, follower = leading(log)
    placed = submit(view, "a1", restarts=1)
    assert isinstance(placed, Placed) and placed.node_id is not None
    asyncio.run(writer.flush())
    asyncio.run(follower.caught_up())
    log.append(NodeDied(node_id=placed.node_id, reason="test", event_id="labels-died"))
    asyncio.run(follower.caught_up())
    assert writer.dirty.is_set(), "the leader reacted: its writer must append without waiting for a request"
    asyncio.run(writer.flush())
    again = [event for event in log if isinstance(event, ActorPlaced) and event.actor_id == "a1"]
    assert len(again) == 2 and again[-1].node_id != placed.node_id


def test_a_newer_election_in_the_log_deposes_the_leader_before_it_answers() -> None:
    log: list[AnyEvent] = [node("n1")]
    view, writer, leader, _bus, _follower = leading(log)
    log.append(new_election(2, "b"))  # another instance won the lease meanwhile
    submit(view, "a1")
    appended_from = asyncio.run(writer.flush())
    shell = writer.shell
    with pytest.raises(ServiceExit, match="newer scheduler was elected"):
        asyncio.run(_check_still_elected(shell, view, leader.elected_at, appended_from))
    assert view.deposed()
    with pytest.raises(ServiceExit):
        asyncio.run(leader.take_over(3))


def test_pipelined_batches_are_answered_in_append_order_and_none_after_a_newer_election(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Batch 2 is decided and appended while batch 1 waits for its answer; another instance's election lands
    between them: batch 1 still counts and is answered, batch 2 is not (every fold ignores it)."""
    log: list[AnyEvent] = [node("n1")]
    view, writer, leader, _bus, _follower = leading(log)
    answered: list[str] = []

    async def answer_and_ack(_bus: object, _fit: object, msg: Msg, reply: object, *, poison: bool) -> None:
        answered.append(msg.subject)

    monkeypatch.setattr(app, "answer_and_ack", answer_and_ack)
    shell = cast(
        Shell, SimpleNamespace(bus=writer.shell.bus, follower=writer.shell.follower, pager=SimpleNamespace(fit=None))
    )
    appended: asyncio.Queue[Appended] = asyncio.Queue()
    for index, actor_id in enumerate(("a1", "a2")):
        decided = [(handle(view, SubmitActor(request=ScheduleRequest(actor_id, {"CPU": 1}))), False)]
        if index == 1:
            log.append(new_election(2, "b"))  # another instance won the lease meanwhile
        from_sequence = asyncio.run(writer.flush())
        appended.put_nowait(Appended(from_sequence, [Msg(cast(Client, None), subject=actor_id)], decided))

    with pytest.raises(ServiceExit, match="newer scheduler was elected"):
        asyncio.run(_answer_in_order(shell, view, leader, appended))
    assert answered == ["a1"]


def test_what_a_request_the_scheduler_failed_on_decided_before_failing_is_still_appended() -> None:
    """The view folded it when it was decided: a log without it would replay to another view (the request itself
    is answered as the scheduler failing, and set aside)."""
    log: list[AnyEvent] = [node("n1")]
    view, writer, _leader, _bus, follower = leading(log)

    def placed_then_broken() -> None:
        view.cluster.submit(ScheduleRequest("a1", {"CPU": 1}))
        raise ValueError("a bug after the placement")

    with pytest.raises(ValueError, match="a bug after the placement"):
        view.decide(placed_then_broken)
    assert not writer.all_stored_and_folded()
    asyncio.run(writer.flush())
    asyncio.run(follower.caught_up())
    assert isinstance(log[-1], ActorPlaced) and log[-1].actor_id == "a1"
    standby, *_rest, standby_follower = scheduler(log, "b")
    asyncio.run(standby_follower.caught_up())
    assert standby.digest() == view.digest()
