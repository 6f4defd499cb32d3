"""The scheduling requests' work queue as its consumers share it: the durable consumer, and replies to the inboxes."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence

import nats.errors
from nats.aio.msg import Msg
from nats.js import api

from schemas import subjects as s
from schemas.replies import Rejected, RequestReply
from services.runtime import refusals
from services.runtime.bus import Bus, answerable
from services.runtime.codec import encode
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


def inbox_of(msg: Msg) -> str:
    """The reply inbox a durable request names ("" when none)."""
    return (msg.headers or {}).get(s.REPLY_HEADER, "")


def request_sequence(msg: Msg) -> int:
    """A delivered request's sequence in `CORRAL_REQUESTS` (the same at every delivery of it)."""
    # $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>
    tokens = msg.reply.split(".")
    if len(tokens) == 9 and tokens[1] == "ACK":
        return int(tokens[5])
    return int(msg.metadata.sequence.stream)


async def send_reply(bus: Bus, subject: str, inbox: str, data: bytes) -> None:
    """Publish an encoded reply to a request's inbox: never to a Corral or JetStream subject, nor a malformed one."""
    if not answerable(inbox):
        log.warning("request on %s names %r as its reply inbox: not answered", subject, inbox[:200])
        return
    try:
        await bus.nc.publish(inbox, data)
    except nats.errors.BadSubjectError:
        log.warning("request on %s names a malformed reply inbox %r: not answered", subject, inbox[:200])


Fit = Callable[[RequestReply], bytes]
"""Encodes a reply within the bus's payload limit (`Pager.fit`)."""


async def settle(bus: Bus, fit: Fit, msg: Msg, reply: RequestReply | None, *, poison: bool) -> None:
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
