"""The bus's log reading: the event log followed from a sequence on (one ordered consumer), read in batches, or up
to a sequence; elections no lease produced made unreadable; the newest sequences; the dead letters' newest."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from email.header import Header, decode_header

import msgspec
import nats.errors
import nats.js.errors
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api

from schemas import AnyEvent, SchedulerElected
from schemas import subjects as s
from services.core.errors import CodecError
from services.runtime.codec import MAX_DEPTH, decode
from services.runtime.connection import BusConnection
from services.runtime.delivery import delivery_of
from services.runtime.elections import ElectionCheck
from services.runtime.nats_private import message_reader
from services.runtime.settings import Settings

log = logging.getLogger("corral.bus")

ENTRIES_PER_TURN = 256
"""Log entries a reader takes from its backlog between two turns of the event loop (the fold of 200,000 waiting
events takes seconds; the lease, the answers and the heartbeats go on meanwhile)."""
BATCH_CONSUMER_IDLE_S = 30.0
"""How long the server keeps a batch reader's consumer that its reader left without deleting (a crash)."""
BATCH_FETCH_S = 5.0
"""How long one fetch of a batch waits for its messages."""


class LogEntry:
    """One event of the event log: its message's stream sequence and subject, and the decoded event (None when
    unreadable). A message holding a batch of events (`subjects.is_batch`) gives one entry per event, in order,
    each with its `index` in the batch; `last` marks the message's last entry.

    `consumer` and `delivered` say which consumer delivered the message and as its how-manieth message: a reader
    that skipped none sees `delivered` count up by one per consumer, whatever the subjects it filters on; `pending`
    is how many messages the consumer had left to deliver after it (the reader's lag); `time_ns` when the stream
    stored it (Unix nanoseconds).
    """

    __slots__ = (
        "consumer",
        "delivered",
        "error",
        "event",
        "index",
        "last",
        "pending",
        "raw",
        "sequence",
        "subject",
        "time_ns",
    )

    def __init__(
        self,
        sequence: int,
        event: AnyEvent | None,
        raw: bytes,
        error: str = "",
        *,
        consumer: str = "",
        delivered: int = 0,
        subject: str = "",
        pending: int = 0,
        time_ns: int = 0,
        index: int = 0,
        last: bool = True,
    ) -> None:
        self.sequence, self.event, self.raw, self.error = sequence, event, raw, error
        self.consumer, self.delivered, self.subject, self.pending = consumer, delivered, subject, pending
        self.time_ns, self.index, self.last = time_ns, index, last


Recognise = Callable[[Msg], AnyEvent | None]
"""Names the event a message of the log stands for without decoding it (None: decode it)."""


class LogReader(BusConnection):
    """The bus's reading of the event log."""

    def __init__(self, nc: NatsClient, settings: Settings) -> None:
        super().__init__(nc, settings)
        self.elections = ElectionCheck(self.js, settings.instance)
        """Checks each `SchedulerElected` read from the log against the election records."""
        self.recognise: Recognise | None = None
        """Asked first for each message the log readers hand back (the scheduler's leader knows its own events)."""

    async def last_dead_event(self, service: str) -> tuple[int, int]:
        """The (sequence, index in its batch) of the newest event `service` sent to dead letters ((0, 0) when
        none)."""
        try:
            msg = await self.js.get_last_msg(s.DEAD_LETTERS_STREAM, s.event_dead_letter_subject(service))
        except nats.js.errors.NotFoundError:
            return 0, 0
        except (TimeoutError, nats.errors.Error) as error:  # a skipped event may then be dead-lettered twice
            log.warning("%s: dead letters not readable (%s)", service, error)
            return 0, 0
        headers = msg.headers or {}
        return header_number(headers, s.DEAD_LETTER_SEQUENCE), header_number(headers, s.DEAD_LETTER_INDEX)

    # reading the log

    async def last_sequence(self, stream: str = s.EVENTS_STREAM, subjects: Sequence[str] = ()) -> int:
        """The sequence of the newest message in `stream`, or of the newest on one of `subjects` (0 when none)."""
        if not subjects:
            info = await self.js.stream_info(stream)
            return int(info.state.last_seq)
        newest = 0
        for subject in subjects:
            with contextlib.suppress(nats.js.errors.NotFoundError):
                newest = max(newest, (await self.js.get_last_msg(stream, subject)).seq or 0)
        return newest

    async def log_identity(self) -> tuple[str, int]:
        """The event log's identity, the creation time of its stream (a store lost and made again gives a new
        one), and the sequence of its newest event."""
        info = await self.js.stream_info(s.EVENTS_STREAM)
        created = info.created.isoformat() if info.created is not None else "at an unknown time"
        return created, int(info.state.last_seq)

    async def read_log(
        self, start: int, *, subjects: Sequence[str] = (), max_bytes: int = 1_048_576
    ) -> AsyncGenerator[LogEntry, None]:
        """Every event from sequence `start` on (only those on `subjects` when given), in order, then new ones as
        they are appended (forever). Its consumer is asked for again while JetStream does not answer (a server
        restarting, say)."""

        def subscribe() -> Awaitable[JetStreamContext.PushSubscription]:
            config = api.ConsumerConfig(  # anew each time: the library writes its delivery inbox into it
                deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE if start > 1 else api.DeliverPolicy.ALL,
                opt_start_seq=start if start > 1 else None,
                filter_subjects=list(subjects) or None,
            )
            return self.js.subscribe(
                s.EVENTS_SUBJECTS,
                stream=s.EVENTS_STREAM,
                ordered_consumer=True,
                config=config,
                idle_heartbeat=1.0,
                pending_msgs_limit=200_000,
                pending_bytes_limit=512 * 1024 * 1024,
            )

        sub = await self.with_retries(subscribe, "the event log's reader")
        next_message = message_reader(sub)
        try:
            read = 0
            while (msg := await next_message()) is not None:
                entries = self._entries(msg, max_bytes)
                if isinstance(entries[0].event, SchedulerElected):
                    await self._check_election(entries[0])
                for entry in entries:  # no turn of the event loop within a message: it is folded whole
                    yield entry
                read += len(entries)
                if read >= ENTRIES_PER_TURN:
                    read = 0
                    await asyncio.sleep(0)  # a backlog folded in one go would starve the lease's renewal
        finally:
            await sub.unsubscribe()

    async def read_batch(self, start: int, count: int, *, max_bytes: int = 1_048_576) -> list[LogEntry]:
        """Up to `count` events from sequence `start` on, in order, as the log holds them now (fewer at its end):
        read through one short-lived pull consumer, deleted before this returns."""
        config = api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=max(1, start),
            ack_policy=api.AckPolicy.NONE,
            inactive_threshold=BATCH_CONSUMER_IDLE_S,
        )

        def subscribe() -> Awaitable[JetStreamContext.PullSubscription]:
            return self.js.pull_subscribe(s.EVENTS_SUBJECTS, stream=s.EVENTS_STREAM, config=config)

        sub = await self.with_retries(subscribe, "a batch of the event log")
        name = ""
        try:
            info = await sub.consumer_info()
            name = info.name
            wanted = min(count, int(info.num_pending or 0))
            entries: list[LogEntry] = []
            fetched = 0
            while fetched < wanted:
                msgs = await sub.fetch(wanted - fetched, timeout=BATCH_FETCH_S)
                fetched += len(msgs)
                for msg in msgs:
                    entries += self._entries(msg, max_bytes)
            return entries
        finally:
            if name:
                with contextlib.suppress(nats.errors.Error, TimeoutError):
                    await self.js.delete_consumer(s.EVENTS_STREAM, name)
            await sub.unsubscribe()

    def _entries(self, msg: Msg, max_bytes: int) -> list[LogEntry]:
        """The message's entry, or one per event of a batch (one standing for all of it when `recognise` names it,
        and one unreadable entry when the batch itself does not decode)."""
        delivery = delivery_of(msg)
        known = self.recognise(msg) if self.recognise is not None else None
        if known is not None:
            found: list[tuple[AnyEvent | None, bytes, str]] = [(known, msg.data, "")]
        elif s.is_batch(msg.subject):
            found = decode_batch(msg.data, max_bytes)
        else:
            event, error = decoded(msg.data, max_bytes)
            found = [(event, msg.data, error)]
        last = len(found) - 1
        return [
            LogEntry(
                delivery.stream_sequence,
                event,
                raw,
                error,
                consumer=delivery.consumer,
                delivered=delivery.consumer_sequence,
                subject=msg.subject,
                pending=delivery.pending,
                time_ns=delivery.time_ns,
                index=index,
                last=index == last,
            )
            for index, (event, raw, error) in enumerate(found)
        ]

    async def _check_election(self, entry: LogEntry) -> None:
        """Make an election no lease produced unreadable, so every reader skips it alike."""
        assert isinstance(entry.event, SchedulerElected)
        reason = await self.elections.why_not(entry.event)
        if reason:
            entry.event, entry.error = None, reason

    async def read_held(self, subjects: Sequence[str] = (), last: int | None = None) -> AsyncGenerator[LogEntry, None]:
        """Every entry from the start of the log (only those on `subjects` when given) up to sequence `last`
        (default: the newest now), in order, the whole of its message included; then it ends."""
        if last is None:
            last = await self.last_sequence(subjects=subjects)
        if last < 1:
            return
        async with contextlib.aclosing(self.read_log(1, subjects=subjects)) as entries:
            async for entry in entries:
                yield entry
                if entry.sequence >= last and entry.last:
                    return

    async def read_to(self, last: int) -> list[AnyEvent]:
        """Every readable event from the start of the log up to sequence `last`, in order."""
        return [entry.event async for entry in self.read_held(last=last) if entry.event is not None]


def header_text(headers: Mapping[str, object], name: str) -> str:
    """A stored message's header as text, "" when absent (nats-py hands a non-ASCII value read through the stream
    API as an `email.header.Header`)."""
    value = headers.get(name)
    if isinstance(value, Header):  # its bytes, as they were sent (UTF-8)
        return "".join(
            part.decode("utf-8", "replace") if isinstance(part, bytes) else part for part, _ in decode_header(value)
        )
    return "" if value is None else str(value)


def header_number(headers: Mapping[str, object], name: str) -> int:
    """A stored message's header as a whole number, 0 when it is none ("²" is a digit to `isdigit`, not to
    `int`)."""
    text = header_text(headers, name)
    return int(text) if text.isascii() and text.isdigit() else 0


def decoded(data: bytes, max_bytes: int) -> tuple[AnyEvent | None, str]:
    """The event `data` encodes, or None and why it is unreadable."""
    try:
        return decode(data, AnyEvent, max_bytes=max_bytes), ""
    except CodecError as error:
        return None, str(error)


def decode_batch(data: bytes, max_bytes: int) -> list[tuple[AnyEvent | None, bytes, str]]:
    """A batch's events in order, each with its own bytes (or None and why it is unreadable: one bad event does not
    make the others unreadable); a single unreadable item when `data` is not a non-empty JSON array."""
    try:  # every event readable (a batch the scheduler wrote): read in one call, the bounds checked once
        events: list[AnyEvent] = decode(data, list[AnyEvent], max_bytes=max_bytes, max_depth=MAX_DEPTH + 1)
    except CodecError:
        events = []
    if events:
        return [(event, bytes(item), "") for event, item in zip(events, _RAW_ITEMS.decode(data), strict=True)]
    try:
        items: list[msgspec.Raw] = decode(data, list[msgspec.Raw], max_bytes=max_bytes, max_depth=MAX_DEPTH + 1)
    except CodecError as error:
        return [(None, data, f"an unreadable batch of events: {error}")]
    if not items:
        return [(None, data, "an empty batch of events")]
    return each_decoded(items, max_bytes)


_RAW_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
"""A JSON array's items as they are (for a batch already read whole: its bounds are checked)."""


def each_decoded(items: list[msgspec.Raw], max_bytes: int) -> list[tuple[AnyEvent | None, bytes, str]]:
    """A batch's events read one by one: an unreadable one with why, the others whole."""
    found: list[tuple[AnyEvent | None, bytes, str]] = []
    for item in items:
        raw = bytes(item)
        event, reason = decoded(raw, max_bytes)
        found.append((event, raw, reason))
    return found
