"""Paging a list answer: every page fits the payload limit, the pages join into the whole answer, of one listing."""

from __future__ import annotations

import pytest

from schemas import ActorPlaced, AnyEvent, NodeRegistered, Pending, Placed, ScheduleRequest
from schemas.commands import RemoveActor
from schemas.queries import ActorInfo, NodeInfo, StatusQuery, StatusReply
from schemas.replies import BatchReply
from services.client.base import joined
from services.core.errors import ConflictError, RejectedError
from services.runtime.codec import decode, encode
from services.runtime.pages import KEPT_LISTINGS, Pager, fit
from services.scheduler.handlers import handle
from services.scheduler.view import SchedulerView

LIMIT = 1_048_576


def _status(actors: int, pending: list[Pending] | None = None) -> StatusReply:
    nodes = [NodeInfo(f"node-{i:03d}", "", {"CPU": 1e6}, {"CPU": 0.0}, {"zone": "z1"}, [], 1000) for i in range(200)]
    infos = [ActorInfo(f"actor-{i:06d}", "default", {"app": "bulk"}, "placed", "node-000") for i in range(actors)]
    groups = {f"pg-{i:04d}": ["node-001", "node-002"] for i in range(1000)}
    return StatusReply(nodes, infos, groups, pending or [], sequence=7)


class _Service:
    """A view that answers a status, and a pager over it as a service has one."""

    def __init__(self, answer: StatusReply) -> None:
        self.answer, self.sequence, self.calls = answer, 7, 0
        self.pager = Pager(lambda: self.sequence, lambda: LIMIT)

    def status(self, _query: StatusQuery) -> StatusReply:
        self.calls += 1
        return self.answer

    def ask(self, query: StatusQuery) -> StatusReply:
        """What a client receives: the page as bytes (checked against the limit), decoded."""
        data = self.pager.fit(self.pager.page(query, self.status))
        assert len(data) <= LIMIT
        reply: StatusReply = decode(data, StatusReply, max_bytes=LIMIT)
        return reply

    def list_all(self, limit: int = 0) -> list[StatusReply]:
        pages = [self.ask(StatusQuery(limit=limit))]
        while pages[-1].next:
            pages.append(self.ask(StatusQuery(cursor=pages[-1].next, limit=limit)))
        return pages


@pytest.mark.scale  # its point is its size: half a minute of CPU (`make test-scale`)
def test_two_hundred_thousand_actors_list_completely_in_pages_under_the_limit() -> None:
    view = SchedulerView(seed=0, rare_resources=())
    events: list[AnyEvent] = [
        NodeRegistered(node_id=f"node-{i:03d}", resources={"CPU": 2000.0}, labels={}) for i in range(100)
    ]
    events += [
        ActorPlaced(actor_id=f"actor-{i:06d}", node_id=f"node-{i % 100:03d}", request=ScheduleRequest(f"actor-{i:06d}"))
        for i in range(200_000)
    ]
    for sequence, event in enumerate(events, start=1):
        view.fold(event, sequence)
    whole = view.status(StatusQuery())
    assert len(whole.actors) == 200_000
    assert len(encode(whole)) > 10 * LIMIT
    service = _Service(whole)
    service.sequence = whole.sequence
    pages = service.list_all()
    assert len(pages) > 10
    assert joined(pages) == whole
    assert service.calls == 1, "the listing is computed once, for its first page"
    assert {page.sequence for page in pages} == {len(events)}


def test_the_pages_of_a_listing_come_from_one_point_in_the_log_while_the_view_moves_on() -> None:
    service = _Service(_status(30_000))
    first = service.ask(StatusQuery())
    service.sequence, service.answer = 8, _status(10)
    rest = [first]
    while rest[-1].next:
        rest.append(service.ask(StatusQuery(cursor=rest[-1].next)))
    assert len(joined(rest).actors) == 30_000


def test_a_cursor_the_service_no_longer_holds_is_a_conflict_once_the_log_moved_on() -> None:
    service = _Service(_status(30_000))
    first = service.ask(StatusQuery())
    other = _Service(_status(30_000))  # another instance, at the same point: it lists again and goes on
    assert other.ask(StatusQuery(cursor=first.next)).actors
    moved = _Service(_status(30_000))
    moved.sequence = 9
    with pytest.raises(ConflictError, match="list again from the first page"):
        moved.ask(StatusQuery(cursor=first.next))
    for nonsense in ("nonsense", "\u00b2.1.1"):  # "²" is a digit to `isdigit`, not to `int`
        with pytest.raises(RejectedError, match="not a cursor of this service"):
            service.ask(StatusQuery(cursor=nonsense))


def test_a_limit_caps_each_list_of_the_whole_answer() -> None:
    reply = joined(_Service(_status(50_000)).list_all(limit=3))
    assert (len(reply.nodes), len(reply.actors), len(reply.placement_groups)) == (3, 3, 3)


def test_a_pending_item_too_large_for_a_page_keeps_its_counts_and_fewer_node_ids() -> None:
    ids = [f"node-{i:07d}" for i in range(150_000)]
    huge = Pending("big", "0/150000 nodes are available", {"Insufficient CPU": 150_000}, {"Insufficient CPU": ids})
    pages = _Service(_status(10, [huge])).list_all()
    (pending,) = joined(pages).pending
    assert pending.reasons == {"Insufficient CPU": 150_000}
    assert 0 < len(pending.nodes_by_reason["Insufficient CPU"]) < 150_000


def test_a_cursor_of_another_query_never_reads_a_listing_held_under_the_same_id() -> None:
    """Another instance's cursor can name an id this one gave a listing of another query (both at one point of the
    log): its pages come from its own query, and this instance's listing is left to its reader."""
    first_instance, second_instance = _Service(_status(30_000)), _Service(_status(30_000))
    theirs = [first_instance.ask(StatusQuery())]
    mine = [second_instance.ask(StatusQuery(limit=20_000))]  # listing id 1 here too, of another query
    while theirs[-1].next:
        theirs.append(second_instance.ask(StatusQuery(cursor=theirs[-1].next)))
    while mine[-1].next:
        mine.append(second_instance.ask(StatusQuery(cursor=mine[-1].next, limit=20_000)))
    assert len(joined(theirs).actors) == 30_000
    assert len(joined(mine).actors) == 20_000


def test_a_leader_never_lists_again_from_decisions_the_log_does_not_hold_yet() -> None:
    """A leading scheduler's view holds what it decided before the log does, at the same sequence. Listed again then
    (its listing dropped for newer ones), a page would start at a position of another list: an actor removed before
    it shifts the rest, and one live actor would be skipped without a word."""
    view = SchedulerView(seed=0, rare_resources=())
    events: list[AnyEvent] = [NodeRegistered(node_id="node-0", resources={"CPU": 2000.0}, labels={})]
    events += [
        ActorPlaced(actor_id=f"a-{i:04d}", node_id="node-0", request=ScheduleRequest(f"a-{i:04d}")) for i in range(1000)
    ]
    for sequence, event in enumerate(events, start=1):
        view.fold(event, sequence)
    view.lead(1, "s1")
    pager = Pager(lambda: view.sequence, lambda: 64 * 1024, exact=lambda: not view.unwritten)

    def page(cursor: str = "") -> StatusReply:
        reply = pager.page(StatusQuery(cursor=cursor), view.status)
        assert isinstance(reply, StatusReply)
        return reply

    pages = [page()]
    for _ in range(KEPT_LISTINGS):  # newer listings under way: the first is dropped
        assert page().next
    handle(view, RemoveActor(actor_id="a-0000"))  # decided, on its way to the log: the sequence has not moved
    with pytest.raises(ConflictError, match="the view holds decisions the log does not hold yet; list again"):
        page(pages[0].next)
    view.take_unwritten()  # appended, and its echo folded: the view is the log's again
    view.sequence += 1
    listed = [page()]
    while listed[-1].next:
        listed.append(page(listed[-1].next))
    assert [actor.actor_id for actor in joined(listed).actors] == [f"a-{i:04d}" for i in range(1, 1000)]


def test_a_batch_answer_over_the_limit_shortens_each_pending_alike_and_keeps_every_answer() -> None:
    """Fifty Pendings of 3,000 node ids each and a placement pass 1 MB together: `fit` keeps all 51 answers in
    order, every Pending's counts whole and its node lists cut alike, the whole under the limit."""
    ids = [f"node-{index:05d}" for index in range(3_000)]
    pendings = [
        Pending(f"w{index}", "0/3000 nodes are available", {"Insufficient CPU": 3_000}, {"Insufficient CPU": ids})
        for index in range(50)
    ]
    batch = BatchReply([Placed("p", "n1"), *pendings])
    limit = 1_048_576
    assert len(encode(batch)) > limit
    data = fit(batch, limit)
    assert len(data) <= limit
    answer = decode(data, BatchReply)
    assert [reply.id for reply in answer.replies] == ["p", *(f"w{index}" for index in range(50))]
    kept = {len(reply.nodes_by_reason["Insufficient CPU"]) for reply in answer.replies if isinstance(reply, Pending)}
    assert len(kept) == 1 and 0 < kept.pop() < 3_000
    assert all(reply.reasons == {"Insufficient CPU": 3_000} for reply in answer.replies if isinstance(reply, Pending))
