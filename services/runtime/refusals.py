"""Refusals of durable requests, kept where any client finds them for the duplicate window.

A refusal leaves no decision in the log, and a resend of its request within the window is a duplicate the stream
neither stores nor delivers: without this bucket, a resend whose first sending's refusal was lost (the client was
away, or another process sent it) gets no answer. The key is the request's sequence in `CORRAL_REQUESTS`, which a
duplicate's publish ack names: it is a valid key as it is, and it names exactly the sending a resend duplicates.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.kv import KV_DEL, KV_OP, KV_PURGE, KeyValue

from schemas import subjects as s
from schemas.replies import Rejected, RequestReply
from services.core.errors import CorralError
from services.runtime import replicas
from services.runtime.bus import DUPLICATE_WINDOW, Bus
from services.runtime.codec import decode

STREAM = f"KV_{s.REFUSALS_BUCKET}"


def refusal_subject(sequence: int) -> str:
    """The subject the refusal of the request stored at `sequence` is kept under."""
    return f"$KV.{s.REFUSALS_BUCKET}.{sequence}"


def _bucket(bus: Bus) -> Awaitable[KeyValue]:
    return replicas.key_value(bus.js, s.REFUSALS_BUCKET, bus.settings.replicas, ttl=DUPLICATE_WINDOW, history=1)


async def declare(bus: Bus) -> KeyValue:
    """The refusals bucket (created if missing) on `settings.replicas` servers, its entries living as long as the
    duplicate window; asked again while JetStream does not answer. Its writers declare it at start."""
    return await bus.answered(lambda: _bucket(bus), f"KV bucket {s.REFUSALS_BUCKET}")


async def keep(bus: Bus, sequence: int, data: bytes) -> None:
    """Store the encoded refusal of the request at `sequence` (before it is acked); asked again while JetStream
    does not answer, the bucket made again when it is missing (deleted by an operator, say)."""

    async def put() -> object:
        try:
            return await bus.js.publish(refusal_subject(sequence), data)
        except nats.js.errors.NoStreamResponseError:
            with contextlib.suppress(TimeoutError, nats.errors.Error):
                await _bucket(bus)
            raise

    await bus.answered(put, f"refusal of request {sequence}")


async def kept(js: JetStreamContext, sequence: int, max_bytes: int) -> Rejected | None:
    """The refusal kept for the request at `sequence`; None when there is none, or it cannot be read (whatever the
    bucket holds is read as untrusted input: an unreadable entry is no refusal)."""
    try:
        msg = await js.get_msg(STREAM, subject=refusal_subject(sequence))
    except (TimeoutError, nats.errors.Error):
        return None
    if (msg.headers or {}).get(KV_OP) in (KV_DEL, KV_PURGE):
        return None
    with contextlib.suppress(CorralError):
        reply = decode(msg.data or b"", RequestReply, max_bytes=max_bytes)
        if isinstance(reply, Rejected):
            return reply
    return None
