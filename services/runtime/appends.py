"""The bus's appends: events published in order with their ids, pipelined, their acks awaited at once, retried until
the stream confirms them, each stored once; a lack of room told to whoever waits; dead letters."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import msgspec
import nats.errors
import nats.js.errors
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

from schemas import AnyEvent
from schemas import subjects as s
from schemas.subjects import subject_of
from services.runtime import telemetry
from services.runtime.codec import encode
from services.runtime.connection import DUPLICATE_WINDOW, BusConnection
from services.runtime.room import no_room
from services.runtime.settings import Settings

log = logging.getLogger("corral.bus")

NO_RESPONDERS = "503"
"""The status of a publish no stream answered (JetStream not ready, for one): retried like a timeout."""


class _PubAck(msgspec.Struct):
    """The stream's answer to a publish: where it stored the message, or why not."""

    stream: str = ""
    seq: int = 0
    duplicate: bool = False
    error: dict[str, Any] | None = None


_PUB_ACK = msgspec.json.Decoder(_PubAck)


class AcksLost(nats.errors.Error):
    """The connection was lost and made again while an append waited for its acks: some may never come."""


APPEND_ACK_SECONDS = 3.0
"""How long an append waits for its acks before publishing again (the stream's leader may have died with them)."""

_RETRIED = (
    AcksLost,
    TimeoutError,
    nats.errors.TimeoutError,
    nats.errors.ConnectionClosedError,
    nats.js.errors.NoStreamResponseError,
    nats.js.errors.ServiceUnavailableError,
)
"""Append failures after which the same batch is published again (the ids make a repeat a no-op); so is a refusal
for lack of room (`room.no_room`), whatever its status code."""


class _Batch:
    """One append waiting for its acks."""

    __slots__ = ("done", "left", "replies", "sequences")

    def __init__(self, size: int) -> None:
        self.left = size
        self.sequences = [0] * size
        self.replies: list[str] = []
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class _Message:
    """One message of an append: a single event on its own subject, or a batch of consecutive events on their
    aggregate's batch subject (`subjects.batch_aggregate`)."""

    __slots__ = ("data", "events", "msg_id", "subject")

    def __init__(self, subject: str, msg_id: str, data: bytes, events: Sequence[AnyEvent]) -> None:
        self.subject, self.msg_id, self.data, self.events = subject, msg_id, data, events


BATCH_MOST = 512
"""At most this many events in one batch message."""
_HEADROOM = 4096
"""Bytes a batch leaves free under the payload limits, for its headers and the protocol's line."""


def messages_of(events: Sequence[AnyEvent], *, batched: bool, limit: int) -> list[_Message]:
    """The messages that append `events` in order: one per event, or with `batched` consecutive events that ride in
    one aggregate's batches (`subjects.batch_aggregate`) together, at most `BATCH_MOST` of them in at most `limit`
    bytes (an event alone is a message of its own)."""
    messages: list[_Message] = []
    run: list[tuple[AnyEvent, bytes]] = []  # each event of the run with its encoding (its own subject unasked)
    aggregate = ""
    size = 1  # the bytes of the run as a batch: "[" and, per event, the event and "," or "]"
    for event in events:
        data = encode(event)
        rides = s.batch_aggregate(event) if batched else None
        if run and (rides != aggregate or len(run) >= BATCH_MOST or size + len(data) + 1 > limit):
            messages.append(_run_message(run, aggregate))
            run, size = [], 1
        if rides is not None:
            run.append((event, data))
            aggregate, size = rides, size + len(data) + 1
        else:
            messages.append(_alone(event, data))
    if run:
        messages.append(_run_message(run, aggregate))
    return messages


def _alone(event: AnyEvent, data: bytes) -> _Message:
    """An event as a message of its own, on its own subject."""
    return _Message(subject_of(event), event.event_id, data, [event])


def _run_message(run: list[tuple[AnyEvent, bytes]], aggregate: str) -> _Message:
    """A run of consecutive events of one batched aggregate as one message (a run of one as the event's own)."""
    if len(run) == 1:
        return _alone(*run[0])
    events = [event for event, _data in run]
    data = b"[" + b",".join(data for _event, data in run) + b"]"
    return _Message(s.batch_subject(aggregate), s.batch_msg_id(events[0].event_id, len(events)), data, events)


class Appends(BusConnection):
    """The bus's appends (and dead letters): what `Bus.append` publishes and how it waits for the acks."""

    def __init__(self, nc: NatsClient, settings: Settings) -> None:
        super().__init__(nc, settings)
        self._acks_inbox = ""
        self._acks_sent = 0
        self._acks_waiting: dict[str, tuple[_Batch, int]] = {}
        self._acked = 0
        """The newest sequence of the last ack of a batch: whatever this bus publishes from now on is stored after it
        (kept once per batch, so the hot path stays as it was)."""
        self.duplicate_window = DUPLICATE_WINDOW
        """The event stream's duplicate window that `append` counts on (a test that shortens the stream's sets it)."""
        self.no_room = ""
        """The server's words while JetStream refuses this bus's appends for lack of room ("" otherwise)."""
        self._room_refused = asyncio.Event()
        self._unconfirmed_since = 0.0
        self._unconfirmed_reason = ""
        """Why appends are not confirmed now ("" while they are): logged when it changes, not at every retry."""

    async def append(
        self, events: Sequence[AnyEvent], expected_last: dict[str, int] | None = None, *, batched: bool = False
    ) -> list[int]:
        """Append events in order; returns each one's stream sequence.

        Each event is a message of its own (`Nats-Msg-Id` = its event id), or with `batched` consecutive events of
        a batched aggregate share one (`messages_of`; they then share its sequence). Publishing is pipelined; a
        failed append is retried (see `_append_again`), so the log stores each message once. `expected_last` maps
        a subject to the sequence its last message must have (optimistic concurrency).
        """
        limit = min(self.nc.max_payload, self.settings.max_message_bytes) - _HEADROOM
        messages = messages_of(events, batched=batched, limit=limit)
        expected, after, published_at = expected_last or {}, self._acked, asyncio.get_running_loop().time()
        try:
            stored = await self._append_once(messages, expected)
        except (*_RETRIED, nats.js.errors.APIError) as error:
            if self.nc.is_closed or not _retried(error):
                raise
            self._not_confirmed(messages, error)
        else:
            if self._unconfirmed_reason:
                self._confirmed()
            return _per_event(messages, stored)
        stored = await self._append_again(messages, expected, after, published_at)
        self._confirmed()
        return _per_event(messages, stored)

    async def done_or_full(self, appending: asyncio.Future[Any]) -> str:
        """Wait until `appending` (a task making this bus's appends) is done, or JetStream refuses them for lack of
        room: "", or the server's words (the task goes on retrying; it is cancelled if this wait is)."""
        try:
            while not appending.done() and not self.no_room:
                refused = asyncio.ensure_future(self._room_refused.wait())
                try:
                    await asyncio.wait((appending, refused), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    refused.cancel()
        except BaseException:
            appending.cancel()
            raise
        return "" if appending.done() else self.no_room

    def _not_confirmed(self, messages: Sequence[_Message], error: Exception) -> None:
        """Log why an append is not confirmed when the reason changed (not at every retry); note a lack of room."""
        room = no_room(error)
        reason = room or str(error) or f"no ack within {APPEND_ACK_SECONDS:g}s"
        if reason != self._unconfirmed_reason:
            if not self._unconfirmed_reason:
                self._unconfirmed_since = asyncio.get_running_loop().time()
            count = sum(len(message.events) for message in messages)
            log.warning("append of %d events not confirmed (%s); retrying until it is", count, reason)
            self._unconfirmed_reason = reason
        if room != self.no_room:
            self.no_room = room
            if room:
                self._room_refused.set()
            else:
                self._room_refused.clear()

    def _confirmed(self) -> None:
        """An append is confirmed: the end of a state of unconfirmed appends, logged once."""
        if self._unconfirmed_reason:
            took = asyncio.get_running_loop().time() - self._unconfirmed_since
            log.info("appends confirmed again, after %.1fs of: %s", took, self._unconfirmed_reason)
        self._unconfirmed_reason, self.no_room = "", ""
        self._room_refused.clear()

    async def _append_again(
        self, messages: Sequence[_Message], expected: dict[str, int], after: int, published_at: float
    ) -> list[int]:
        """Publish the messages again, after their acks did not come, until the stream confirms them; their
        sequences.

        The stream drops a repeated `Nats-Msg-Id` only within its duplicate window, so a copy must never reach it
        later than that after one it stored. A retry is therefore published only while connected (nats-py would
        hold a publish made while disconnected and send it whenever the connection is back, any time later; what it
        held unwritten when the connection dropped is dropped then, see `nats_private`), and one more than half
        the window after the messages were (last) published first looks up which of them the log already holds
        after sequence `after` (an ack this bus had before the first publish): only the others are published again.
        The lookup's answer comes after the server read every earlier copy on this connection, so a copy stored
        after the lookup is at most moments older than the republish, which it then drops. A message stored after
        a later one of the same append stays there: the sequences returned are then not in ascending order.
        """
        loop = asyncio.get_running_loop()
        stored: dict[str, int] = {}
        left = list(messages)
        while True:
            await asyncio.sleep(0.25)
            try:
                await self._until_connected()
                if loop.time() - published_at > self.duplicate_window / 2:
                    published_at = loop.time()
                    stored.update(await self._stored_after(left, after))
                    left = [message for message in left if message.msg_id not in stored]
                if left:
                    sequences = await self._append_once(left, expected, only_connected=True)
                    stored.update((message.msg_id, sequence) for message, sequence in zip(left, sequences, strict=True))
                return [stored[message.msg_id] for message in messages]
            except (*_RETRIED, nats.js.errors.APIError) as error:
                if self.nc.is_closed or not _retried(error):
                    raise
                self._not_confirmed(left, error)

    async def _until_connected(self) -> None:
        """Return once the connection is up (raises `ConnectionClosedError` once it is closed for good)."""
        while not self.nc.is_connected:
            if self.nc.is_closed:
                raise nats.errors.ConnectionClosedError
            await asyncio.sleep(0.25)

    async def stored_after(self, events: Sequence[AnyEvent], after: int) -> dict[str, int]:
        """Event id -> stream sequence, for those of `events` (each appended as a message of its own) the log holds
        after sequence `after` (see `_stored_after`)."""
        return await self._stored_after([_Message(subject_of(e), e.event_id, b"", [e]) for e in events], after)

    async def _stored_after(self, messages: Sequence[_Message], after: int) -> dict[str, int]:
        """`Nats-Msg-Id` -> stream sequence, for those of `messages` the log holds after sequence `after`.

        Each message is looked for by its `Nats-Msg-Id` among its subject's messages after `after`, one request per
        message (JetStream finds the next on a subject): not for a hot path. The first copy found counts.
        """
        wanted: dict[str, set[str]] = {}
        for message in messages:
            wanted.setdefault(message.subject, set()).add(message.msg_id)
        found: dict[str, int] = {}
        for subject, ids in wanted.items():
            sequence = after + 1
            while not ids.issubset(found):
                try:
                    msg = await self.js.get_msg(s.EVENTS_STREAM, seq=sequence, subject=subject, next=True)
                except nats.js.errors.NotFoundError:
                    break
                msg_id = (msg.headers or {}).get("Nats-Msg-Id", "")
                sequence = int(msg.seq or 0)
                if msg_id in ids and msg_id not in found:
                    found[msg_id] = sequence
                sequence += 1
        return found

    async def _append_once(
        self, messages: Sequence[_Message], expected_last: dict[str, int], *, only_connected: bool = False
    ) -> list[int]:
        """Publish every message with a reply subject of our own, then wait for all the stream's acks at once;
        `only_connected`: `AcksLost` rather than a publish nats-py would hold while disconnected.

        `js.publish_async` does the same with a future, a random token and a JSON parse of the ack per message,
        about twice the cost; here one future stands for the whole append.
        """
        prefix = await self._ack_prefix()
        batch = _Batch(len(messages))
        waiting = self._acks_waiting
        try:
            for index, message in enumerate(messages):
                headers = telemetry.inject({"Nats-Msg-Id": message.msg_id})
                if message.subject in expected_last:
                    headers["Nats-Expected-Last-Subject-Sequence"] = str(expected_last[message.subject])
                self._acks_sent += 1
                reply = f"{prefix}.{self._acks_sent}"
                waiting[reply] = (batch, index)
                batch.replies.append(reply)
                if only_connected and not self.nc.is_connected:  # checked in the same step as the publish
                    raise AcksLost("the connection dropped before the batch was published again")
                await self.nc.publish(message.subject, message.data, reply=reply, headers=headers)
            if batch.left:
                await asyncio.wait_for(batch.done, timeout=APPEND_ACK_SECONDS)
            return batch.sequences
        finally:
            for reply in batch.replies:
                waiting.pop(reply, None)
            if batch.done.done() and not batch.done.cancelled():
                batch.done.exception()  # retrieved: a publish that failed first is what propagates

    def acks_lost(self) -> None:
        """Fail every append waiting for acks (it publishes again): those sent to a server now gone never come."""
        for batch, _index in list(self._acks_waiting.values()):
            if not batch.done.done():
                batch.done.set_exception(AcksLost("acks lost in a reconnect"))

    async def _ack_prefix(self) -> str:
        if not self._acks_inbox:
            self._acks_inbox = self.nc.new_inbox()  # set before awaiting: a concurrent append uses the same one
            await self.nc.subscribe(self._acks_inbox + ".*", cb=self._on_ack)
        return self._acks_inbox

    async def _on_ack(self, msg: Msg) -> None:
        found = self._acks_waiting.pop(msg.subject, None)
        if found is None:
            return  # the ack of a batch that timed out (and is being retried)
        batch, index = found
        if batch.done.done():
            return
        if not msg.data and msg.headers and msg.headers.get("Status") == NO_RESPONDERS:
            batch.done.set_exception(nats.js.errors.NoStreamResponseError())
            return
        try:
            ack = _PUB_ACK.decode(msg.data)
        except msgspec.DecodeError as error:
            batch.done.set_exception(nats.js.errors.Error(f"unreadable publish ack {msg.data[:200]!r}: {error}"))
            return
        if ack.error is not None:
            try:
                nats.js.errors.APIError.from_error({"code": 0, **ack.error})  # raises the error's own type
            except nats.js.errors.Error as error:
                batch.done.set_exception(error)
            except TypeError:  # fields nats-py does not know
                batch.done.set_exception(nats.js.errors.APIError(description=str(ack.error)))
            return
        batch.sequences[index] = ack.seq
        batch.left -= 1
        if not batch.left:
            self._acked = max(self._acked, ack.seq)
            batch.done.set_result(None)

    async def dead_letter(
        self,
        service: str,
        data: bytes,
        reason: str,
        subject: str = "",
        sequence: int = 0,
        request: int = 0,
        *,
        index: int = 0,
    ) -> None:
        """Keep an unreadable or unappliable message on `corral.dlq.<service>` with the reason in headers.

        An event of the log (its `sequence` given, and its `index` when it came in a batch) goes to
        `corral.dlq.<service>.events`, stored once per service, sequence and index however many of the service's
        processes skip it at once. A request (its `request`
        sequence in `CORRAL_REQUESTS` given, and its `index` in its batch, from 1, when it came in one) is stored
        once however many times it is delivered within the duplicate window (a delivery whose terminate was late
        comes again).
        """
        headers = {s.DEAD_LETTER_REASON: reason[:1000], s.DEAD_LETTER_SUBJECT: subject}
        where = s.dead_letter_subject(service)
        if request:
            headers["Nats-Msg-Id"] = f"{service}-request-{request}" + (f".{index}" if index else "")
        if sequence:
            headers[s.DEAD_LETTER_SEQUENCE] = str(sequence)
            headers["Nats-Msg-Id"] = f"{service}-event-{sequence}"
            if index:
                headers[s.DEAD_LETTER_INDEX] = str(index)
                headers["Nats-Msg-Id"] += f".{index}"
            where = s.event_dead_letter_subject(service)
        try:
            await self.js.publish(where, data, headers=headers)
        except (TimeoutError, nats.errors.Error) as error:
            log.error("dead letter from %s lost (%s): %s", service, error, reason)


def _per_event(messages: Sequence[_Message], sequences: Sequence[int]) -> list[int]:
    """Each event's sequence: its message's."""
    return [sequence for message, sequence in zip(messages, sequences, strict=True) for _ in message.events]


def _retried(error: Exception) -> bool:
    """Whether an append that met `error` is published again (see `_RETRIED`)."""
    return isinstance(error, _RETRIED) or bool(no_room(error))
