"""The request pattern under test: a JetStream publish with a reply-inbox header, then the decision on that inbox;
with batches, one `RequestBatch` message for many requests and one `BatchReply` for them all."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from nats.aio.msg import Msg

from schemas import Pending, Placed, ScheduleRequest
from schemas import subjects as s
from schemas.commands import RemoveActor, RequestBatch, SchedulerRequest, SubmitActor
from schemas.replies import Accepted, BatchReply, Rejected, RequestReply
from services.client import Client
from services.runtime.codec import decode, encode

Outcome = Literal["placed", "pending", "accepted", "error"]

FLOOR_PREFIX = "loadtest"
FLOOR_SCHEDULE = f"{FLOOR_PREFIX}.req.schedule"
FLOOR_REMOVE = f"{FLOOR_PREFIX}.req.remove_actor"
FLOOR_BATCH = f"{FLOOR_PREFIX}.req.batch"

BATCH_ANSWER = BatchReply | Rejected
"""What a batch's inbox receives: one answer per request, or one refusal of the whole batch."""


class Replies:
    """One wildcard inbox subscription per connection; each request waits on its own token under it."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.prefix = client.bus.nc.new_inbox()
        self.waiting: dict[str, asyncio.Future[tuple[float, bytes]]] = {}
        self.count = 0

    async def start(self) -> None:
        """Subscribe to `<inbox>.*`."""
        await self.client.bus.nc.subscribe(self.prefix + ".*", cb=self._arrived)

    async def _arrived(self, msg: Msg) -> None:
        future = self.waiting.pop(msg.subject, None)
        if future is not None and not future.done():
            future.set_result((time.perf_counter(), msg.data))

    def expect(self) -> tuple[str, asyncio.Future[tuple[float, bytes]]]:
        """A fresh reply subject and the future its reply (arrival time, bytes) lands in."""
        self.count += 1
        inbox = f"{self.prefix}.{self.count}"
        future: asyncio.Future[tuple[float, bytes]] = asyncio.get_running_loop().create_future()
        self.waiting[inbox] = future
        return inbox, future


@dataclass
class Connection:
    """A shared client connection and its reply inbox."""

    client: Client
    replies: Replies


@dataclass(frozen=True)
class Result:
    """One request: when it was published, when its reply arrived, and what came back."""

    started: float
    finished: float
    outcome: Outcome
    detail: str = ""


async def durable_request(
    conn: Connection, subject: str, payload: bytes, msg_id: str, timeout: float
) -> tuple[float, float, bytes]:
    """Publish to JetStream with `Nats-Msg-Id` and the reply header; (publish time, reply time, reply bytes)."""
    inbox, future = conn.replies.expect()
    headers = {"Nats-Msg-Id": msg_id, s.REPLY_HEADER: inbox}
    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout):
            stored = await conn.client.bus.js.publish(subject, payload, headers=headers, timeout=timeout)
            if stored.duplicate:  # the stream dropped it: no decision will come to this inbox
                raise ValueError(f"Nats-Msg-Id {msg_id!r} repeats a request stored at sequence {stored.seq}")
            finished, data = await future
    finally:
        conn.replies.waiting.pop(inbox, None)
    return started, finished, data


def _outcome(reply: RequestReply) -> tuple[Outcome, str]:
    if isinstance(reply, Placed):
        return "placed", reply.node_id or ""
    if isinstance(reply, Pending):
        return "pending", reply.message
    if isinstance(reply, Accepted):
        return "accepted", reply.message
    assert isinstance(reply, Rejected)
    return "error", reply.error


async def _decided(conn: Connection, subject: str, payload: bytes, msg_id: str, timeout: float) -> Result:
    started = time.perf_counter()
    try:
        started, finished, data = await durable_request(conn, subject, payload, msg_id, timeout)
        outcome, detail = _outcome(decode(data, RequestReply))
    except Exception as error:  # a load test counts every failure (timeouts, bad replies, lost connections)
        return Result(started, time.perf_counter(), "error", f"{type(error).__name__}: {error}")
    return Result(started, finished, outcome, detail)


async def _decided_batch(
    conn: Connection, subject: str, requests: Sequence[SchedulerRequest], timeout: float
) -> list[Result]:
    """Publish `requests` as one `RequestBatch` (a fresh `Nats-Msg-Id`) and wait for its `BatchReply`: one result per
    request, each timed as the batch's round trip; a failure of the whole batch fails each of its requests."""
    started = time.perf_counter()
    try:
        payload = encode(RequestBatch(requests=list(requests)))
        started, finished, data = await durable_request(conn, subject, payload, uuid.uuid4().hex, timeout)
        answer = decode(data, BATCH_ANSWER)
    except Exception as error:  # a load test counts every failure (timeouts, bad replies, lost connections)
        return [Result(started, time.perf_counter(), "error", f"{type(error).__name__}: {error}")] * len(requests)
    if isinstance(answer, Rejected):
        return [Result(started, finished, "error", f"the batch was refused: {answer.error}")] * len(requests)
    if len(answer.replies) != len(requests):
        wrong = f"{len(answer.replies)} answers to a batch of {len(requests)} requests"
        return [Result(started, finished, "error", wrong)] * len(requests)
    return [Result(started, finished, *_outcome(reply)) for reply in answer.replies]


class Target(Protocol):
    """Where the users send their requests: the Corral scheduler, or the no-op decider of the bus floor."""

    name: str
    description: str

    async def submit(self, conn: Connection, request: ScheduleRequest) -> Result:
        """Schedule one actor and wait for the decision."""

    async def remove(self, conn: Connection, actor_id: str) -> Result:
        """Remove one actor and wait for the reply."""

    async def submit_many(self, conn: Connection, requests: Sequence[ScheduleRequest]) -> list[Result]:
        """Schedule these actors in one batch message and wait for its answers: one result per request."""

    async def remove_many(self, conn: Connection, actor_ids: Sequence[str]) -> list[Result]:
        """Remove these actors in one batch message and wait for its answers: one result per actor."""


class CorralTarget:
    """The real thing: `corral.req.schedule` to the scheduler; removes through `Client.remove_actor`; batches of
    either through `corral.req.batch`."""

    name = "corral"
    description = "the Corral scheduler, through corral.req.schedule"

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout

    async def submit(self, conn: Connection, request: ScheduleRequest) -> Result:
        """Publish `SubmitActor` and wait for Placed or Pending."""
        payload = encode(SubmitActor(request=request))
        return await _decided(conn, s.SCHEDULE, payload, request.actor_id, self.timeout)

    async def remove(self, conn: Connection, actor_id: str) -> Result:
        """`Client.remove_actor`, timed."""
        started = time.perf_counter()
        try:
            reply = await conn.client.remove_actor(actor_id)
        except Exception as error:  # a load test counts every failure (rejections, timeouts, lost connections)
            return Result(started, time.perf_counter(), "error", f"{type(error).__name__}: {error}")
        return Result(started, time.perf_counter(), "accepted", reply.message)

    async def submit_many(self, conn: Connection, requests: Sequence[ScheduleRequest]) -> list[Result]:
        """Publish one `RequestBatch` of `SubmitActor`s to `corral.req.batch` and wait for its `BatchReply`."""
        batch = [SubmitActor(request=request) for request in requests]
        return await _decided_batch(conn, s.BATCH, batch, self.timeout)

    async def remove_many(self, conn: Connection, actor_ids: Sequence[str]) -> list[Result]:
        """Publish one `RequestBatch` of `RemoveActor`s to `corral.req.batch` and wait for its `BatchReply`."""
        batch = [RemoveActor(actor_id=actor_id) for actor_id in actor_ids]
        return await _decided_batch(conn, s.BATCH, batch, self.timeout)


class FloorTarget:
    """The bus floor: the same messages to `loadtest.req.>`, answered by a decider that decides nothing."""

    name = "floor"
    description = "the bus floor: the same messages through LOADTEST_FLOOR to a no-op decider"

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout

    async def submit(self, conn: Connection, request: ScheduleRequest) -> Result:
        """Publish the same `SubmitActor` to the floor's work queue and wait for its reply."""
        payload = encode(SubmitActor(request=request))
        return await _decided(conn, FLOOR_SCHEDULE, payload, request.actor_id, self.timeout)

    async def remove(self, conn: Connection, actor_id: str) -> Result:
        """Publish the same `RemoveActor` to the floor's work queue and wait for its reply."""
        payload = encode(RemoveActor(actor_id=actor_id))
        return await _decided(conn, FLOOR_REMOVE, payload, f"rm-{actor_id}", self.timeout)

    async def submit_many(self, conn: Connection, requests: Sequence[ScheduleRequest]) -> list[Result]:
        """Publish the same `RequestBatch` to the floor's work queue and wait for its `BatchReply`."""
        batch = [SubmitActor(request=request) for request in requests]
        return await _decided_batch(conn, FLOOR_BATCH, batch, self.timeout)

    async def remove_many(self, conn: Connection, actor_ids: Sequence[str]) -> list[Result]:
        """Publish the same `RequestBatch` of removals to the floor's work queue and wait for its `BatchReply`."""
        batch = [RemoveActor(actor_id=actor_id) for actor_id in actor_ids]
        return await _decided_batch(conn, FLOOR_BATCH, batch, self.timeout)
