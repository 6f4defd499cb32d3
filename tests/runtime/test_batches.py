"""How the scheduler's appends group events into batch messages, and how a reader takes a batch apart: in order,
each event readable on its own."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import (
    ActorPlaced,
    ActorRemoved,
    AnyEvent,
    PlacementGroupRemoved,
    ScheduleRequest,
    VirtualNodeResized,
    VirtualNodesReserved,
)
from schemas import subjects as s
from services.core.errors import CodecError
from services.runtime.appends import BATCH_MOST, messages_of
from services.runtime.codec import MAX_DEPTH, decode, encode
from services.runtime.log_reader import decode_batch, each_decoded
from tests.support.examples import examples

LIMIT = 1_000_000


def placed(actor_id: str) -> ActorPlaced:
    return ActorPlaced(actor_id=actor_id, node_id="n1", request=ScheduleRequest(actor_id), event_id=f"e-{actor_id}")


def removed(actor_id: str) -> ActorRemoved:
    return ActorRemoved(actor_id=actor_id, event_id=f"r-{actor_id}")


def test_consecutive_actor_events_go_as_one_batch_and_anything_else_breaks_the_run() -> None:
    group = PlacementGroupRemoved(pg_id="pg", event_id="g")
    events: list[AnyEvent] = [placed("a1"), removed("a0"), placed("a2"), group, placed("a3")]
    first, between, last = messages_of(events, batched=True, limit=LIMIT)
    assert (first.subject, first.msg_id, first.events) == (s.batch_subject(s.ACTOR), "e-a1+3", events[:3])
    assert [event for event, _raw, _error in decode_batch(first.data, LIMIT)] == events[:3]
    assert (between.subject, between.msg_id, between.data) == (s.subject_of(group), "g", encode(group))
    assert (last.subject, last.msg_id, last.events) == (s.event_subject(s.ACTOR, "a3"), "e-a3", [events[4]])


def test_a_virtual_nodes_resize_rides_in_the_actor_batch_around_it_and_other_vnode_facts_go_alone() -> None:
    """Inside a virtual cluster a flexible node grows before a placement and shrinks after a removal: those
    resizes stay in the batch, in order; a cluster's reservation still goes alone on its own subject."""
    grown = VirtualNodeResized(vc_id="t", vnode_id="t-v", parent_node="n1", resources={"CPU": 2}, event_id="g1")
    shrunk = VirtualNodeResized(vc_id="t", vnode_id="t-v", parent_node="n1", resources={"CPU": 1}, event_id="g2")
    reserved = VirtualNodesReserved(vc_id="u", vnodes=[], event_id="v")
    events: list[AnyEvent] = [grown, placed("a1"), removed("a0"), shrunk, reserved]
    batch, alone = messages_of(events, batched=True, limit=LIMIT)
    assert (batch.subject, batch.msg_id, batch.events) == (s.batch_subject(s.ACTOR), "g1+4", events[:4])
    assert [event for event, _raw, _error in decode_batch(batch.data, LIMIT)] == events[:4]
    assert (alone.subject, alone.events) == (s.event_subject(s.VNODE, "u"), [reserved])


def test_without_batching_every_event_is_a_message_on_its_own_subject() -> None:
    events: list[AnyEvent] = [placed("a1"), removed("a0")]
    messages = messages_of(events, batched=False, limit=LIMIT)
    assert [(m.subject, m.msg_id, m.data) for m in messages] == [
        (s.subject_of(event), event.event_id, encode(event)) for event in events
    ]


@pytest.mark.parametrize("limit", [LIMIT, 3 * len(encode(placed("a00000")))])
def test_a_batch_holds_at_most_its_count_and_its_bytes(limit: int) -> None:
    events: list[AnyEvent] = [placed(f"a{index:05d}") for index in range(BATCH_MOST + 5)]
    messages = messages_of(events, batched=True, limit=limit)
    assert [event for message in messages for event in message.events] == events
    assert all(len(message.events) <= BATCH_MOST and len(message.data) <= limit for message in messages)
    assert len(messages) == (2 if limit == LIMIT else (len(events) + 1) // 2)


def test_one_unreadable_event_leaves_the_rest_of_its_batch_readable() -> None:
    good = [encode(placed("a1")), encode(removed("a1"))]
    found = decode_batch(b"[" + good[0] + b',{"type":"ActorPlaced","actor_id":7},' + good[1] + b"]", LIMIT)
    assert [event for event, _raw, _error in found] == [placed("a1"), None, removed("a1")]
    assert [raw for _event, raw, _error in found] == [good[0], b'{"type":"ActorPlaced","actor_id":7}', good[1]]
    assert "actor_id" in found[1][2]


@pytest.mark.parametrize(("data", "reason"), [(b"[]", "an empty batch"), (b'{"a":1}', "an unreadable batch")])
def test_what_is_not_a_batch_of_events_is_one_unreadable_entry(data: bytes, reason: str) -> None:
    ((event, raw, error),) = decode_batch(data, LIMIT)
    assert (event, raw) == (None, data) and error.startswith(reason)


ITEMS = [
    encode(placed("a1")),
    encode(removed("a0")),
    b'{"type":"ActorPlaced","actor_id":7}',
    b'{"type":"NoSuchEvent"}',
    b'{"type":"ActorRemoved","actor_id":"a2","event_id":"x","unknown":1}',
    b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
    b'"text"',
    b"null",
]


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.sampled_from(ITEMS), min_size=1, max_size=12))
def test_a_batch_read_in_one_call_gives_what_reading_each_event_gives(items: list[bytes]) -> None:
    """Whatever a batch holds (readable events, unreadable ones), `decode_batch` gives each event, its bytes and its
    reason exactly as reading the events one by one does (a batch nested past the limit is one unreadable entry)."""
    data = b"[" + b",".join(items) + b"]"
    try:
        raws = decode(data, list[msgspec.Raw], max_depth=MAX_DEPTH + 1)
    except CodecError:
        assert [(event, raw) for event, raw, _ in decode_batch(data, LIMIT)] == [(None, data)]
        return
    assert decode_batch(data, LIMIT) == each_decoded(raws, LIMIT)
