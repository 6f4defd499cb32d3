"""The leading scheduler decides a fetch of many batch messages in parts, appending between: deciding never holds the
event loop (and with it the lease's renewal) for much more than `REQUESTS_AT_ONCE` decisions."""

from __future__ import annotations

import asyncio
from typing import cast

import msgspec
import pytest
from nats.aio.msg import Msg

from schemas import NodeRegistered, Placed, ScheduleRequest
from schemas.commands import RemoveActor, RequestBatch, SchedulerRequest, SubmitActor
from schemas.replies import BatchReply, Rejected
from services.runtime.codec import encode
from services.runtime.settings import Settings
from services.runtime.work_queue import REQUESTS_AT_ONCE
from services.scheduler import app
from services.scheduler.app import Decided, _decide_part
from services.scheduler.handlers import handle
from services.scheduler.view import SchedulerView
from tests.scheduler.fake_bus import fake_shell


def message(data: bytes, sequence: int) -> Msg:
    """A request message of the work queue as the consumer delivers it (its ack subject names its sequence)."""
    reply = f"$JS.ACK.CORRAL_REQUESTS.scheduler.1.{sequence}.{sequence}.0.0"
    return Msg(cast("object", None), subject="corral.req.batch", reply=reply, data=data)  # type: ignore[arg-type]


def batch_of(start: int, count: int) -> bytes:
    requests: list[SchedulerRequest] = [
        SubmitActor(request=ScheduleRequest(f"a{index}", {"CPU": 1})) for index in range(start, start + count)
    ]
    return encode(RequestBatch(requests=requests))


def test_a_fetch_of_many_batches_is_decided_in_parts_of_about_requests_at_once() -> None:
    """Six messages of 1,000 requests: each part stops at the message that reaches `REQUESTS_AT_ONCE`, the last
    takes what is left; every request is decided once, in order."""
    view = SchedulerView(seed=1, rare_resources=())
    view.fold(NodeRegistered(node_id="n", resources={"CPU": 10_000}, labels={}, event_id="labels-n"), 1)
    shell, _bus, _follower = fake_shell([], view)
    shell.bus.settings = Settings(max_message_bytes=1 << 20)
    fetched = [message(batch_of(number * 1_000, 1_000), number + 1) for number in range(6)]
    parts: list[list[Decided]] = []
    done = 0
    while done < len(fetched):
        parts.append(asyncio.run(_decide_part(shell, view, fetched[done:])))
        done += len(parts[-1])
    per_part = -(-REQUESTS_AT_ONCE // 1_000)  # messages until a part holds REQUESTS_AT_ONCE requests
    assert [len(part) for part in parts] == [per_part] * (6 // per_part) + ([6 % per_part] if 6 % per_part else [])
    assert len(parts) > 1
    replies = [
        reply
        for part in parts
        for answer, _poison in part
        if isinstance(answer, BatchReply)
        for reply in answer.replies
    ]
    assert [reply.id for reply in replies if isinstance(reply, Placed)] == [f"a{index}" for index in range(6_000)]


def test_a_part_holds_one_message_at_least_and_single_requests_count_one_each() -> None:
    """A part takes `REQUESTS_AT_ONCE` single requests; the next one starts the next part."""
    view = SchedulerView(seed=1, rare_resources=())
    shell, _bus, _follower = fake_shell([], view)
    shell.bus.settings = Settings(max_message_bytes=1 << 20)
    fetched = [message(encode(RemoveActor(actor_id=f"x{index}")), index + 1) for index in range(REQUESTS_AT_ONCE + 3)]
    assert len(asyncio.run(_decide_part(shell, view, fetched))) == REQUESTS_AT_ONCE


def test_a_request_the_scheduler_fails_on_inside_a_batch_is_set_aside_and_the_others_are_decided(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bug on the second request of three: it is kept in dead letters under its place in the batch (2) and
    answered as the scheduler failing; the first and the third are placed, and the message is not poison."""
    view = SchedulerView(seed=1, rare_resources=())
    view.fold(NodeRegistered(node_id="n", resources={"CPU": 10}, labels={}, event_id="labels-n"), 1)
    shell, _bus, _follower = fake_shell([], view)
    shell.bus.settings = Settings(max_message_bytes=1 << 20)
    kept: list[tuple[bytes, str, int, int]] = []

    async def dead_letter(_service: str, data: bytes, reason: str, _subject: str, *, request: int, index: int) -> None:
        kept.append((data, reason, request, index))

    monkeypatch.setattr(shell.bus, "dead_letter", dead_letter, raising=False)  # the fake bus keeps none

    def buggy(scheduler_view: SchedulerView, request: SchedulerRequest) -> object:
        if isinstance(request, SubmitActor) and request.request.actor_id == "a1":
            raise KeyError("a bug")
        return handle(scheduler_view, request)

    monkeypatch.setattr(app, "handle", buggy)
    ((reply, poison),) = asyncio.run(_decide_part(shell, view, [message(batch_of(0, 3), 7)]))
    assert isinstance(reply, BatchReply) and not poison
    first, failed, third = reply.replies
    assert isinstance(first, Placed) and isinstance(third, Placed)
    assert isinstance(failed, Rejected) and failed.kind == "unavailable"
    assert "the scheduler failed on this request (KeyError: 'a bug')" in failed.error
    ((data, reason, sequence, index),) = kept
    assert (reason, sequence, index) == ("KeyError: 'a bug'", 7, 2)
    assert msgspec.json.decode(data)["request"]["actor_id"] == "a1"  # the request itself, not its batch
