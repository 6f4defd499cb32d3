"""The scheduling requests' work queue as its consumers share it: the durable consumer, pulled a batch at a time
(`pull`, `PullConsumer`), a request's sequence, and replies to the inboxes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext, api

from schemas import subjects as s
from schemas.commands import DurableRequest, RequestBatch
from schemas.replies import DurableReply, Rejected
from services.core.errors import CodecError
from services.runtime import refusals
from services.runtime.bus import Bus
from services.runtime.codec import decode, encode
from services.runtime.connection import STREAMS, answerable
from services.runtime.delivery import delivery_of
from services.runtime.nats_private import pending_queue
from services.runtime.room import log_full
from services.runtime.settings import Settings

log = logging.getLogger("corral.requests")


def request_consumer(settings: Settings) -> api.ConsumerConfig:
    """The one durable consumer of `CORRAL_REQUESTS`: the scheduler pulls from it, or every decision worker does."""
    return api.ConsumerConfig(
        durable_name=s.REQUESTS_CONSUMER,
        ack_policy=api.AckPolicy.EXPLICIT,
        ack_wait=settings.request_ack_wait,
        max_ack_pending=-1,
    )


REQUESTS_AT_ONCE = 1_024
"""Requests decided together at most (more only in one message): a fetch of many clients' batches is decided in parts
of about this many, so that deciding never holds the event loop (the scheduler's lease renewal, a worker's acks in
time) for long."""


def durable_request(msg: Msg, max_bytes: int) -> DurableRequest:
    """The request (or batch) `msg` carries; a `CodecError` when it cannot be read, or when a batch names an
    idempotency key (`KEY_HEADER`): its resends could not be answered as a keyed request's are."""
    request: DurableRequest = decode(msg.data, DurableRequest, max_bytes=max_bytes)
    key = (msg.headers or {}).get(s.KEY_HEADER)
    if key and isinstance(request, RequestBatch):
        raise CodecError(
            "RequestBatch",
            f"header {s.KEY_HEADER} {key[:100]!r}: a batch carries no idempotency key (its Nats-Msg-Id stores it "
            "once); send a keyed request alone",
        )
    return request


def inbox_of(msg: Msg) -> str:
    """The reply inbox a durable request names ("" when none)."""
    return (msg.headers or {}).get(s.REPLY_HEADER, "")


def request_sequence(msg: Msg) -> int:
    """A delivered request's sequence in `CORRAL_REQUESTS` (the same at every delivery of it)."""
    return delivery_of(msg).stream_sequence


async def pull(bus: Bus, subject: str, stream: str, config: api.ConsumerConfig) -> PullConsumer:
    """The durable pull consumer `config.durable_name` of `stream` (created with `config` when missing; asked
    again while JetStream does not answer)."""
    durable = config.durable_name
    assert durable, "a durable pull consumer needs a durable_name"
    if not config.filter_subjects:
        config.filter_subject = subject
    config.name = durable

    async def declare() -> None:
        """The stream (one of Corral's; another is its owner's to make) and the consumer, each made again if
        missing (deleted by an operator, say)."""
        if any(known.name == stream for known in STREAMS):
            await bus.ensure_stream(stream)
        try:
            await bus.js.consumer_info(stream, durable)
        except nats.js.errors.NotFoundError:
            log.info("consumer %s of %s: declared", durable, stream)
            await bus.js.add_consumer(stream, config=config)

    await bus.with_retries(declare, f"consumer {durable} of {stream}")
    inbox = bus.nc.new_inbox()
    sub = await bus.nc.subscribe(inbox + ".*", pending_msgs_limit=200_000, pending_bytes_limit=512 * 1024 * 1024)
    return PullConsumer(bus, sub, f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}", inbox, declare)


class PullConsumer:
    """A durable pull consumer read a batch at a time, with one pull request per batch.

    Each request asks for what is waiting, or else for the first message to arrive within the timeout (`no_wait`
    with `expires`), so the server ends it at once with a status and no request lingers. Its messages are read
    straight from the queue of a subscription of our own: the library's `fetch` starts a task and a timer per
    message. Every request has its own reply subject, so a late status of an earlier one cannot end a later one;
    messages are taken whichever request brought them.
    """

    def __init__(
        self, bus: Bus, sub: Subscription, next_subject: str, inbox: str, declare: Callable[[], Awaitable[None]]
    ) -> None:
        self.bus, self.sub, self.next_subject, self.inbox = bus, sub, next_subject, inbox
        self.declare = declare
        """Makes the stream and the consumer again when missing; run after a refused pull request."""
        self._requests = 0
        self._queue = pending_queue(sub)

    async def fetch(self, batch: int, timeout: float) -> list[Msg]:
        """Up to `batch` messages: those waiting now, else the first to come within `timeout` (TimeoutError if none)."""
        self._requests += 1
        reply = f"{self.inbox}.{self._requests}"
        request = f'{{"batch":{batch},"no_wait":true,"expires":{int(timeout * 1e9)}}}'.encode()
        await self.bus.nc.publish(self.next_subject, request, reply=reply)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout + 1.0  # the server's own timeout status normally comes first
        queue = self._queue
        msgs: list[Msg] = []
        while len(msgs) < batch:
            left = max(0.0, deadline - loop.time())
            try:
                if queue is None:  # another nats-py: its own (slower) way
                    msg = await self.sub.next_msg(timeout=left)
                else:
                    msg = await queue.get(left)
            except (TimeoutError, nats.errors.TimeoutError):
                break
            status = JetStreamContext.is_status_msg(msg)
            if status is None:
                msgs.append(msg)
            elif msg.subject == reply:  # 404 nothing (more) waiting, 408 expired, 409 refused: this request is over
                if status not in (api.StatusCode.NO_MESSAGES, api.StatusCode.REQUEST_TIMEOUT) and not msgs:
                    log.warning("pull request on %s refused: %s %s", self.next_subject, status, msg.headers)
                    await asyncio.sleep(min(timeout, 0.25))
                    with contextlib.suppress(TimeoutError, nats.errors.Error):  # the consumer or stream deleted?
                        await self.declare()
                break
        if not msgs:
            raise TimeoutError(f"no message on {self.next_subject} within {timeout}s")
        return msgs

    async def unsubscribe(self) -> None:
        """Stop receiving (a request still open on the server ends with its expiry)."""
        await self.sub.unsubscribe()


async def send_reply(bus: Bus, subject: str, inbox: str, data: bytes) -> None:
    """Publish an encoded reply to a request's inbox: never to a Corral or JetStream subject, nor a malformed one."""
    if not answerable(inbox):
        log.warning("request on %s names %r as its reply inbox: not answered", subject, inbox[:200])
        return
    try:
        await bus.nc.publish(inbox, data)
    except nats.errors.BadSubjectError:
        log.warning("request on %s names a malformed reply inbox %r: not answered", subject, inbox[:200])


Fit = Callable[[DurableReply], bytes]
"""Encodes a reply within the bus's payload limit (`Pager.fit`)."""


async def answer_and_ack(bus: Bus, fit: Fit, msg: Msg, reply: DurableReply | None, *, poison: bool) -> None:
    """Send `reply` (if any) to the request's inbox, then ack the request, or terminate a poison one. Kept first
    (`refusals`), for resends: a request sent with an idempotency key (`KEY_HEADER`), which leaves the work queue
    with the ack, and a refusal of one with a `Nats-Msg-Id` (the client's sends all carry one: the request's
    `command_id`, else a fresh id no resend repeats)."""
    inbox = inbox_of(msg)
    data = b"" if reply is None else fit(reply)
    headers = msg.headers or {}
    if headers.get(s.KEY_HEADER):
        await refusals.keep_request(bus, request_sequence(msg), msg.data)
    if isinstance(reply, Rejected) and headers.get("Nats-Msg-Id"):
        await refusals.keep(bus, request_sequence(msg), data)
    if inbox and reply is not None:
        await send_reply(bus, msg.subject, inbox, data)
    await (msg.term() if poison else msg.ack())


async def tell_no_room(bus: Bus, msgs: Sequence[Msg], reason: str) -> None:
    """Tell the client of each request of `msgs` that the event log has no room for its decision (`reason`: the
    server's words): the request stays queued, and is decided and answered (to an inbox nobody may read) later."""
    outcome = "the request stays queued and is decided once the log has room"
    data = encode(Rejected(log_full(reason, outcome), "storage_full"))
    for msg in msgs:
        inbox = inbox_of(msg)
        if inbox:
            with contextlib.suppress(nats.errors.Error):  # the connection may be down: the client times out
                await send_reply(bus, msg.subject, inbox, data)
