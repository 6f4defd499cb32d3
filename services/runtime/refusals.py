"""What a resend of a durable request sent with an idempotency key is answered from, kept where any client finds it
for the duplicate window: the request its key first stored, and its refusal.

A resend within the window is a duplicate the stream neither stores nor delivers; its publish ack names the
sequence of the sending it duplicates in `CORRAL_REQUESTS`, which keys both records here (a valid key as it is, and
exactly that sending). The request is read from the work queue while it waits there, and from here once it is acked
(it is kept first): a resend under the same key with other content is a conflict, never answered for the request
that was stored. A refusal leaves no decision in the log: without it here, a resend whose first sending's refusal
was lost (the client was away, or another process sent it) gets no answer.
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
from services.runtime.bus import Bus
from services.runtime.codec import decode
from services.runtime.connection import DUPLICATE_WINDOW

STREAM = f"KV_{s.REFUSALS_BUCKET}"


def refusal_subject(sequence: int) -> str:
    """The subject the refusal of the request stored at `sequence` is kept under."""
    return f"$KV.{s.REFUSALS_BUCKET}.{sequence}"


def request_subject(sequence: int) -> str:
    """The subject the keyed request stored at `sequence` is kept under."""
    return f"$KV.{s.REFUSALS_BUCKET}.request.{sequence}"


def _bucket(bus: Bus) -> Awaitable[KeyValue]:
    return replicas.key_value(bus.js, s.REFUSALS_BUCKET, bus.settings.replicas, ttl=DUPLICATE_WINDOW, history=1)


async def declare(bus: Bus) -> KeyValue:
    """The refusals bucket (created if missing) on `settings.replicas` servers, its entries living as long as the
    duplicate window; asked again while JetStream does not answer. Its writers declare it at start."""
    return await bus.with_retries(lambda: _bucket(bus), f"KV bucket {s.REFUSALS_BUCKET}")


async def keep(bus: Bus, sequence: int, data: bytes) -> None:
    """Store the encoded refusal of the request at `sequence` (before it is acked)."""
    await _put(bus, refusal_subject(sequence), data, f"refusal of request {sequence}")


async def keep_request(bus: Bus, sequence: int, data: bytes) -> None:
    """Store the keyed request at `sequence`, as the stream holds it (before it is acked)."""
    await _put(bus, request_subject(sequence), data, f"keyed request {sequence}")


async def _put(bus: Bus, subject: str, data: bytes, what: str) -> None:
    """Publish `data` on `subject` of the bucket; asked again while JetStream does not answer, the bucket made again
    when it is missing (deleted by an operator, say)."""

    async def put() -> object:
        try:
            return await bus.js.publish(subject, data)
        except nats.js.errors.NoStreamResponseError:
            with contextlib.suppress(TimeoutError, nats.errors.Error):
                await _bucket(bus)
            raise

    await bus.with_retries(put, what)


async def kept(js: JetStreamContext, sequence: int, max_bytes: int) -> Rejected | None:
    """The refusal kept for the request at `sequence`; None when there is none, or it cannot be read (whatever the
    bucket holds is read as untrusted input: an unreadable entry is no refusal)."""
    data = await _read(js, refusal_subject(sequence))
    with contextlib.suppress(CorralError):
        reply = decode(data or b"", RequestReply, max_bytes=max_bytes)
        if isinstance(reply, Rejected):
            return reply
    return None


async def kept_request(js: JetStreamContext, sequence: int) -> bytes | None:
    """The keyed request kept for `sequence`, as the stream held it (untrusted bytes); None when there is none, or it
    cannot be read."""
    return await _read(js, request_subject(sequence))


async def _read(js: JetStreamContext, subject: str) -> bytes | None:
    try:
        msg = await js.get_msg(STREAM, subject=subject)
    except (TimeoutError, nats.errors.Error):
        return None
    if (msg.headers or {}).get(KV_OP) in (KV_DEL, KV_PURGE):
        return None
    return msg.data or b""
