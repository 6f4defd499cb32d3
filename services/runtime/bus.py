"""The bus: a NATS connection with JetStream, the streams declared in code, event appends and log reading."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import msgspec
import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext, api
from nats.js.kv import KeyValue

from schemas import AnyEvent, SchedulerElected
from schemas import subjects as s
from schemas.subjects import subject_of
from services.core.errors import CodecError
from services.runtime import replicas, telemetry
from services.runtime.codec import decode, encode
from services.runtime.elections import ElectionCheck
from services.runtime.nats_private import drop_unwritten, pending_queue
from services.runtime.room import no_room
from services.runtime.settings import Settings

log = logging.getLogger("corral.bus")

DUPLICATE_WINDOW = 120.0
"""How long (seconds) the event and request streams remember a `Nats-Msg-Id`: a repeat within it is dropped."""

STREAMS = (
    api.StreamConfig(
        name=s.EVENTS_STREAM,
        subjects=[s.EVENTS_SUBJECTS],
        storage=api.StorageType.FILE,
        duplicate_window=DUPLICATE_WINDOW,
        description="The event log of record",
    ),
    api.StreamConfig(
        name=s.REQUESTS_STREAM,
        subjects=[s.REQUESTS_SUBJECTS],
        storage=api.StorageType.FILE,
        retention=api.RetentionPolicy.WORK_QUEUE,
        duplicate_window=DUPLICATE_WINDOW,
        description="Scheduling requests waiting for the scheduler",
    ),
    api.StreamConfig(
        name=s.DEAD_LETTERS_STREAM,
        subjects=[s.DEAD_LETTERS_SUBJECTS],
        storage=api.StorageType.FILE,
        max_age=7 * 24 * 3600.0,
        description="Messages a service could not decode or apply",
    ),
)


LOG_STREAMS = (s.EVENTS_STREAM, s.DEAD_LETTERS_STREAM)
"""The streams every service uses: the event log and the dead letters (the scheduler also has the requests')."""


NO_RESPONDERS = "503"
"""The status of a publish no stream answered (JetStream not ready, for one): retried like a timeout."""


class BusUnreachable(ConnectionError):  # noqa: N818 - a state, like ConnectionRefusedError
    """No NATS server answered within the time a caller allowed for the first connection."""


class _PubAck(msgspec.Struct):
    """The stream's answer to a publish: where it stored the message, or why not."""

    stream: str = ""
    seq: int = 0
    duplicate: bool = False
    error: dict[str, Any] | None = None


_PUB_ACK = msgspec.json.Decoder(_PubAck)


class AcksLost(nats.errors.Error):
    """The connection was lost and made again while an append waited for its acks: some may never come."""


ENTRIES_PER_TURN = 256
"""Log entries a reader takes from its backlog between two turns of the event loop (the fold of 200,000 waiting
events takes seconds; the lease, the answers and the heartbeats go on meanwhile)."""
BATCH_CONSUMER_IDLE_S = 30.0
"""How long the server keeps a batch reader's consumer that its reader left without deleting (a crash)."""
BATCH_FETCH_S = 5.0
"""How long one fetch of a batch waits for its messages."""
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

CONSUMER_LIMIT = 10026
"""JetStream's error code for "maximum consumers limit reached": asked again with a back-off, never fatal."""
LONGEST_CONSUMER_WAIT_S = 5.0
"""The longest wait between two tries to make a consumer while the stream or account has no room for it."""

_UNANSWERED = (
    TimeoutError,
    nats.errors.TimeoutError,
    nats.errors.NoRespondersError,
    nats.js.errors.NoStreamResponseError,
    nats.js.errors.ServiceUnavailableError,
)
"""What a JetStream request meets while no server answers for its stream: asked again by `Bus.answered`."""

T = TypeVar("T")


class _Batch:
    """One append waiting for its acks."""

    __slots__ = ("done", "left", "replies", "sequences")

    def __init__(self, size: int) -> None:
        self.left = size
        self.sequences = [0] * size
        self.replies: list[str] = []
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class LogEntry:
    """One message of the event log: its stream sequence, subject and decoded event (None when unreadable).

    `consumer` and `delivered` say which consumer delivered it and as its how-manieth message: a reader that
    skipped none sees `delivered` count up by one per consumer, whatever the subjects it filters on; `pending`
    is how many messages the consumer had left to deliver after it (the reader's lag); `time_ns` when the stream
    stored it (Unix nanoseconds).
    """

    __slots__ = ("consumer", "delivered", "error", "event", "pending", "raw", "sequence", "subject", "time_ns")

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
    ) -> None:
        self.sequence, self.event, self.raw, self.error = sequence, event, raw, error
        self.consumer, self.delivered, self.subject, self.pending = consumer, delivered, subject, pending
        self.time_ns = time_ns


OWN_EVENT_SUBJECTS = tuple(f"{s.PREFIX}.evt.{aggregate}." for aggregate in (s.ACTOR, s.PLACEMENT_GROUP, s.VNODE))
"""Where only the scheduler appends, and only scheduler (epoch-fenced) events (see `Bus.skip_own_events`)."""


class Bus:
    """A connected NATS client with JetStream; reconnects forever and logs connection changes."""

    def __init__(self, nc: NatsClient, settings: Settings) -> None:
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream(timeout=5.0, publish_async_max_pending=8192)
        self.settings = settings
        self.closing = False
        self.elections = ElectionCheck(self.js, settings.instance)
        """Checks each `SchedulerElected` read from the log against the election records."""
        self.connection_listeners: list[Callable[[bool], None]] = []
        """Called with False when the connection to NATS is lost and with True when it is back."""
        self._own_prefix = ""
        self._own_stand_in: AnyEvent | None = None
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

    def skip_own_events(self, msg_id_prefix: str, stand_in: AnyEvent) -> None:
        """From now on `read_log` hands back `stand_in` for the writer's own events, without decoding them.

        An own event is one on an actor or placement-group subject whose `Nats-Msg-Id` starts with
        `msg_id_prefix` (a leading scheduler's prefix names its instance and epoch, so only it wrote those: it
        folded them when it decided them, and its view skips their echo; decoding them first would be wasted).
        """
        self._own_prefix, self._own_stand_in = msg_id_prefix, stand_in

    @classmethod
    async def connect(
        cls,
        settings: Settings,
        name: str,
        on_reconnect: Callable[[], Awaitable[None]] | None = None,
        *,
        timeout: float | None = None,
    ) -> Bus:
        """Connect to `settings.nats_url` (retrying while the server starts); `on_reconnect` runs after a reconnect.

        Without `timeout` the first connection is retried until it succeeds (a service waits for its bus); with
        one, `BusUnreachable` says after `timeout` seconds that no server answered. A failed first connection is
        logged once, not per retry, and so is a lost one: the first error while reconnecting, until reconnected.
        """

        made: list[Bus] = []
        failures: list[Exception] = []
        disconnected: list[Exception] = []  # while reconnecting, an error was logged: the next attempts' are not

        async def on_error(error: Exception) -> None:
            if made:
                if not disconnected:
                    log.warning("%s: NATS error: %s", name, error)
                if made[0].nc.is_reconnecting:
                    disconnected[:] = [error]
                return
            if not failures:
                log.warning("%s: cannot reach NATS at %s (%s); retrying", name, settings.nats_url, error)
            failures[:] = [error]

        def tell(connected: bool) -> None:
            for listener in made[0].connection_listeners if made else ():
                listener(connected)

        async def on_disconnected() -> None:
            if not (made and made[0].closing):
                dropped = drop_unwritten(made[0].nc) if made else 0
                log.warning("%s: disconnected from NATS (%s bytes unwritten dropped); reconnecting", name, dropped)
                tell(False)

        async def on_reconnected() -> None:
            disconnected.clear()
            log.info("%s: reconnected to NATS", name)
            if made:
                made[0].acks_lost()
            tell(True)
            if on_reconnect is not None:
                await on_reconnect()

        options: dict[str, Any] = {
            "name": name,
            "connect_timeout": 2 if timeout is None else max(0.1, min(2.0, timeout)),
            "allow_reconnect": True,
            "max_reconnect_attempts": -1,
            "reconnect_time_wait": 0.25,
            "error_cb": on_error,
            "disconnected_cb": on_disconnected,
            "reconnected_cb": on_reconnected,
            "pending_size": 64 * 1024 * 1024,
        }
        try:
            async with asyncio.timeout(timeout):
                made.append(cls(await nats.connect(settings.nats_servers, **options), settings))
        except TimeoutError:
            why = f": {failures[-1]}" if failures else ""
            raise BusUnreachable(f"no NATS server answered at {settings.nats_url} within {timeout:g}s{why}") from None
        if failures:
            log.info("%s: connected to NATS at %s", name, settings.nats_url)
        return made[0]

    async def ensure_streams(self, names: Sequence[str] = LOG_STREAMS) -> None:
        """Create the streams named (of `STREAMS`) if missing, on `settings.replicas` servers; idempotent.

        An existing stream keeps its configuration except its replicas, moved to `settings.replicas`
        (`SettingsError` when NATS cannot). A service declares only the streams it uses: deploy/nats.conf lets it
        inspect and create no others.

        Asked again while JetStream does not answer (`answered`): a service starting just after nats-server
        restarted, or while a cluster elects a stream's leader, waits instead of exiting.
        """
        for name in names:
            await self.answered(functools.partial(self._ensure_stream, name), f"stream {name}")

    async def _ensure_stream(self, name: str) -> None:
        """Create the stream `name` (of `STREAMS`) if missing, else move it to `settings.replicas`; asked once."""
        (config,) = [config for config in STREAMS if config.name == name]
        try:
            await replicas.replicate(self.js, name, self.settings.replicas)
        except nats.js.errors.NotFoundError:
            await replicas.add_stream(self.js, config, self.settings.replicas)

    async def lease_bucket(self, bucket: str = s.LEASE_BUCKET) -> KeyValue:
        """The KV bucket holding leases (the scheduler's, unless another is named; created if missing), on
        `settings.replicas` servers; asked again while JetStream does not answer."""

        def declare() -> Awaitable[KeyValue]:
            return replicas.key_value(self.js, bucket, self.settings.replicas, ttl=self.settings.lease_ttl, history=1)

        return await self.answered(declare, f"KV bucket {bucket}")

    async def answered(self, ask: Callable[[], Awaitable[T]], what: str) -> T:
        """`ask()`, asked again while JetStream does not answer it (a stream of a cluster between two leaders, say:
        its requests go unanswered until the others elect one), or refuses a consumer at its limit (backing off up
        to `LONGEST_CONSUMER_WAIT_S`); the outage is logged once, and its end."""
        warned = False
        full = 0
        while True:
            try:
                answer = await ask()
            except _UNANSWERED as error:
                if self.nc.is_closed:
                    raise
                if not warned:
                    log.warning("%s: no answer (%s); asking again", what, str(error) or type(error).__name__)
                    warned = True
                await asyncio.sleep(0.25)
                continue
            except nats.js.errors.APIError as error:
                if error.err_code != CONSUMER_LIMIT or self.nc.is_closed:
                    raise
                if not warned:
                    log.warning("%s: %s; asking again, less often each time", what, error.description)
                    warned = True
                await asyncio.sleep(min(LONGEST_CONSUMER_WAIT_S, 0.25 * 2**full))
                full += 1
                continue
            if warned:
                log.info("%s: answered", what)
            return answer

    # appending

    async def append(self, events: Sequence[AnyEvent], expected_last: dict[str, int] | None = None) -> list[int]:
        """Append events in order (each with `Nats-Msg-Id` = its event id); returns their stream sequences.

        Publishing is pipelined; a failed batch is retried (see `_append_again`), so the log stores each event once.
        `expected_last` maps a subject to the sequence its last event must have (optimistic concurrency).
        """
        expected, after, published_at = expected_last or {}, self._acked, asyncio.get_running_loop().time()
        try:
            sequences = await self._append_once(events, expected)
        except (*_RETRIED, nats.js.errors.APIError) as error:
            if self.nc.is_closed or not _retried(error):
                raise
            self._not_confirmed(events, error)
        else:
            if self._unconfirmed_reason:
                self._confirmed()
            return sequences
        sequences = await self._append_again(events, expected, after, published_at)
        self._confirmed()
        return sequences

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

    def _not_confirmed(self, events: Sequence[AnyEvent], error: Exception) -> None:
        """Log why an append is not confirmed when the reason changed (not at every retry); note a lack of room."""
        room = no_room(error)
        reason = room or str(error) or f"no ack within {APPEND_ACK_SECONDS:g}s"
        if reason != self._unconfirmed_reason:
            if not self._unconfirmed_reason:
                self._unconfirmed_since = asyncio.get_running_loop().time()
            log.warning("append of %d events not confirmed (%s); retrying until it is", len(events), reason)
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
        self, events: Sequence[AnyEvent], expected: dict[str, int], after: int, published_at: float
    ) -> list[int]:
        """Publish the batch again, after its acks did not come, until the stream confirms it; its sequences.

        The stream drops a repeated `Nats-Msg-Id` only within its duplicate window, so a copy must never reach it
        later than that after one it stored. A retry is therefore published only while connected (nats-py would
        hold a publish made while disconnected and send it whenever the connection is back, any time later; what it
        held unwritten when the connection dropped is dropped then, see `nats_private`), and one more than half
        the window after the batch was (last) published first looks up which of its events the log already holds
        after sequence `after` (an ack this bus had before the first publish): only the others are published again.
        The lookup's answer comes after the server read every earlier copy on this connection, so a copy stored
        after the lookup is at most moments older than the republish, which it then drops. An event stored after
        a later one of its batch stays there: the sequences returned are then not in ascending order.
        """
        loop = asyncio.get_running_loop()
        stored: dict[str, int] = {}
        left = list(events)
        while True:
            await asyncio.sleep(0.25)
            try:
                await self._until_connected()
                if loop.time() - published_at > self.duplicate_window / 2:
                    published_at = loop.time()
                    stored.update(await self.stored_after(left, after))
                    left = [event for event in left if event.event_id not in stored]
                if left:
                    sequences = await self._append_once(left, expected, only_connected=True)
                    stored.update((event.event_id, sequence) for event, sequence in zip(left, sequences, strict=True))
                return [stored[event.event_id] for event in events]
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
        """Event id -> stream sequence, for those of `events` the log holds after sequence `after`.

        Each event is looked for by its `Nats-Msg-Id` among its subject's messages after `after`, one request per
        message (JetStream finds the next on a subject): not for a hot path. The first copy found counts.
        """
        wanted: dict[str, set[str]] = {}
        for event in events:
            wanted.setdefault(subject_of(event), set()).add(event.event_id)
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
        self, events: Sequence[AnyEvent], expected_last: dict[str, int], *, only_connected: bool = False
    ) -> list[int]:
        """Publish every event with a reply subject of our own, then wait for all the stream's acks at once;
        `only_connected`: `AcksLost` rather than a publish nats-py would hold while disconnected.

        `js.publish_async` does the same with a future, a random token and a JSON parse of the ack per event,
        about twice the cost; here one future stands for the whole batch.
        """
        prefix = await self._ack_prefix()
        batch = _Batch(len(events))
        waiting = self._acks_waiting
        try:
            for index, event in enumerate(events):
                subject = subject_of(event)
                headers = telemetry.inject({"Nats-Msg-Id": event.event_id})
                if subject in expected_last:
                    headers["Nats-Expected-Last-Subject-Sequence"] = str(expected_last[subject])
                self._acks_sent += 1
                reply = f"{prefix}.{self._acks_sent}"
                waiting[reply] = (batch, index)
                batch.replies.append(reply)
                if only_connected and not self.nc.is_connected:  # checked in the same step as the publish
                    raise AcksLost("the connection dropped before the batch was published again")
                await self.nc.publish(subject, encode(event), reply=reply, headers=headers)
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

    async def dead_letter(self, service: str, data: bytes, reason: str, subject: str = "", sequence: int = 0) -> None:
        """Keep an unreadable or unappliable message on `corral.dlq.<service>` with the reason in headers.

        An event of the log (its `sequence` given) goes to `corral.dlq.<service>.events`, stored once per
        service and sequence however many of the service's processes skip it at once.
        """
        headers = {s.DEAD_LETTER_REASON: reason[:1000], s.DEAD_LETTER_SUBJECT: subject}
        where = s.dead_letter_subject(service)
        if sequence:
            headers[s.DEAD_LETTER_SEQUENCE] = str(sequence)
            headers["Nats-Msg-Id"] = f"{service}-event-{sequence}"
            where = s.event_dead_letter_subject(service)
        try:
            await self.js.publish(where, data, headers=headers)
        except (TimeoutError, nats.errors.Error) as error:
            log.error("dead letter from %s lost (%s): %s", service, error, reason)

    async def last_dead_event(self, service: str) -> int:
        """The sequence of the newest event `service` sent to dead letters (0 when none)."""
        try:
            msg = await self.js.get_last_msg(s.DEAD_LETTERS_STREAM, s.event_dead_letter_subject(service))
        except nats.js.errors.NotFoundError:
            return 0
        except (TimeoutError, nats.errors.Error) as error:  # a skipped event may then be dead-lettered twice
            log.warning("%s: dead letters not readable (%s)", service, error)
            return 0
        text = (msg.headers or {}).get(s.DEAD_LETTER_SEQUENCE, "0")
        return int(text) if text.isdigit() else 0

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
    ) -> AsyncIterator[LogEntry]:
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

        sub = await self.answered(subscribe, "the event log's reader")
        # Messages already received are taken straight from the subscription's queue: the library's iterator
        # starts a task and an `asyncio.wait` per message. It is still what waits for the next one (and ends
        # when the subscription closes).
        queue = pending_queue(sub)
        messages = sub.messages
        try:
            while True:
                drained = 0
                while queue is not None and not queue.empty():
                    msg = queue.get_nowait()
                    entry = self._entry(msg, max_bytes)
                    if isinstance(entry.event, SchedulerElected):
                        await self._check_election(entry)
                    yield entry
                    drained += 1
                    if drained % ENTRIES_PER_TURN == 0:
                        await asyncio.sleep(0)  # a backlog folded in one go would starve the lease's renewal
                try:
                    msg = await anext(messages)
                except StopAsyncIteration:
                    return
                entry = self._entry(msg, max_bytes)
                if isinstance(entry.event, SchedulerElected):
                    await self._check_election(entry)
                yield entry
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

        sub = await self.answered(subscribe, "a batch of the event log")
        name = ""
        try:
            info = await sub.consumer_info()
            name = info.name
            wanted = min(count, int(info.num_pending or 0))
            entries: list[LogEntry] = []
            while len(entries) < wanted:
                msgs = await sub.fetch(wanted - len(entries), timeout=BATCH_FETCH_S)
                entries.extend(self._entry(msg, max_bytes) for msg in msgs)
            return entries
        finally:
            if name:
                with contextlib.suppress(nats.errors.Error, TimeoutError):
                    await self.js.delete_consumer(s.EVENTS_STREAM, name)
            await sub.unsubscribe()

    def _entry(self, msg: Msg, max_bytes: int) -> LogEntry:
        consumer, sequence, delivered, pending, time_ns = _delivery(msg)
        event, error = self._event_of(msg, max_bytes)
        return LogEntry(
            sequence,
            event,
            msg.data,
            error,
            consumer=consumer,
            delivered=delivered,
            subject=msg.subject,
            pending=pending,
            time_ns=time_ns,
        )

    async def _check_election(self, entry: LogEntry) -> None:
        """Make an election no lease produced unreadable, so every reader skips it alike."""
        assert isinstance(entry.event, SchedulerElected)
        reason = await self.elections.why_not(entry.event)
        if reason:
            entry.event, entry.error = None, reason

    def _event_of(self, msg: Msg, max_bytes: int) -> tuple[AnyEvent | None, str]:
        """The message's event (the stand-in for one of our own), or None and why it is unreadable."""
        stand_in = self._own_stand_in
        if stand_in is not None and msg.subject.startswith(OWN_EVENT_SUBJECTS):
            msg_id = msg.headers.get("Nats-Msg-Id", "") if msg.headers else ""
            if msg_id.startswith(self._own_prefix):
                return stand_in, ""
        try:
            return decode(msg.data, AnyEvent, max_bytes=max_bytes), ""
        except CodecError as error:
            return None, str(error)

    async def read_to(self, last: int) -> list[AnyEvent]:
        """Every readable event from the start of the log up to sequence `last`, in order."""
        events: list[AnyEvent] = []
        if last < 1:
            return events
        async for entry in self.read_log(1):
            if entry.event is not None:
                events.append(entry.event)
            if entry.sequence >= last:
                break
        return events

    # work queues

    async def pull(self, subject: str, stream: str, config: api.ConsumerConfig) -> PullConsumer:
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
                await self._ensure_stream(stream)
            try:
                await self.js.consumer_info(stream, durable)
            except nats.js.errors.NotFoundError:
                log.info("consumer %s of %s: declared", durable, stream)
                await self.js.add_consumer(stream, config=config)

        await self.answered(declare, f"consumer {durable} of {stream}")
        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox + ".*", pending_msgs_limit=200_000, pending_bytes_limit=512 * 1024 * 1024)
        return PullConsumer(self, sub, f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}", inbox, declare)

    # request / reply

    async def serve(self, subject: str, handler: Callable[[Msg], Awaitable[bytes]], queue: str = "") -> Any:
        """Answer requests on `subject` (a queue group per service) with `handler`'s bytes."""

        async def respond(msg: Msg) -> None:
            with telemetry.span_from(msg.headers, subject):
                reply = await handler(msg)
            if answerable(msg.reply):
                await msg.respond(reply)
            elif msg.reply:
                log.warning("request on %s names %r as its reply subject: not answered", subject, msg.reply[:200])

        return await self.nc.subscribe(subject, queue=queue, cb=respond)

    async def close(self) -> None:
        """Flush and close (a short drain: see STACK-NOTES on drain and JetStream subscriptions)."""
        if self.nc.is_closed:
            return
        self.closing = True
        with contextlib.suppress(TimeoutError, nats.errors.Error, OSError):
            await asyncio.wait_for(self.nc.flush(), timeout=1.0)
        with contextlib.suppress(nats.errors.Error, OSError):  # the connection may be down (a reset socket)
            await self.nc.close()


def _retried(error: Exception) -> bool:
    """Whether an append that met `error` is published again (see `_RETRIED`)."""
    return isinstance(error, _RETRIED) or bool(no_room(error))


def answerable(reply: str) -> bool:
    """Whether a message's reply subject may be answered: an inbox, never a Corral or JetStream subject (a hostile
    sender could otherwise have a service publish into the event log or call the JetStream API)."""
    return bool(reply) and not reply.startswith((f"{s.PREFIX}.", "$"))


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


def _delivery(msg: Msg) -> tuple[str, int, int, int, int]:
    """(consumer, stream sequence, consumer sequence, messages pending, stored at in Unix ns) from a JetStream
    message's reply subject, read without building `msg.metadata`."""
    # $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>
    tokens = msg.reply.split(".")
    if len(tokens) == 9 and tokens[1] == "ACK":
        return tokens[3], int(tokens[5]), int(tokens[6]), int(tokens[8]), int(tokens[7])
    metadata = msg.metadata  # the longer form, with a domain and an account hash
    sequence = metadata.sequence
    stored = metadata.timestamp
    time_ns = round(stored.timestamp() * 1e9) if stored is not None else 0
    consumer = metadata.consumer or ""
    return consumer, int(sequence.stream), int(sequence.consumer), int(metadata.num_pending or 0), time_ns
