"""The bus: a NATS connection with JetStream, the streams declared in code, event appends and log reading."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api
from nats.js.kv import KeyValue

from schemas import (
    ActorFailed,
    ActorPending,
    ActorPlaced,
    ActorRemoved,
    ActorSubmitted,
    AnyEvent,
    NodeDied,
    NodeLabelsChanged,
    NodeRegistered,
    PlacementGroupBundlesLost,
    PlacementGroupPending,
    PlacementGroupPlaced,
    PlacementGroupRemoved,
    PlacementGroupSubmitted,
    SchedulerElected,
    TaintsChanged,
)
from schemas import subjects as s
from services.runtime import telemetry
from services.runtime.codec import CodecError, decode, encode
from services.runtime.settings import Settings

log = logging.getLogger("corral.bus")

CONNECT_ATTEMPTS = 40
"""Tries, 0.25 s apart, to reach NATS at start (it may still be starting)."""

STREAMS = (
    api.StreamConfig(
        name=s.EVENTS_STREAM,
        subjects=[s.EVENTS_SUBJECTS],
        storage=api.StorageType.FILE,
        duplicate_window=120.0,
        description="The event log of record",
    ),
    api.StreamConfig(
        name=s.REQUESTS_STREAM,
        subjects=[s.REQUESTS_SUBJECTS],
        storage=api.StorageType.FILE,
        retention=api.RetentionPolicy.WORK_QUEUE,
        duplicate_window=120.0,
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


def subject_of(event: AnyEvent) -> str:
    """The subject an event is appended to: `corral.evt.<aggregate>.<id>`."""
    if isinstance(event, NodeRegistered | NodeDied | NodeLabelsChanged):
        return s.event_subject(s.NODE, event.node_id)
    if isinstance(event, TaintsChanged):
        return s.event_subject(s.TAINT, event.node_id)
    if isinstance(event, ActorSubmitted):
        return s.event_subject(s.ACTOR, event.request.actor_id)
    if isinstance(event, ActorPlaced | ActorPending | ActorFailed | ActorRemoved):
        return s.event_subject(s.ACTOR, event.actor_id)
    if isinstance(event, PlacementGroupSubmitted):
        return s.event_subject(s.PLACEMENT_GROUP, event.request.pg_id)
    if isinstance(
        event, PlacementGroupPlaced | PlacementGroupPending | PlacementGroupBundlesLost | PlacementGroupRemoved
    ):
        return s.event_subject(s.PLACEMENT_GROUP, event.pg_id)
    assert isinstance(event, SchedulerElected)
    return s.event_subject(s.SCHEDULER, "lease")


class LogEntry:
    """One message of the event log: its stream sequence and the decoded event (None when unreadable)."""

    __slots__ = ("error", "event", "raw", "sequence")

    def __init__(self, sequence: int, event: AnyEvent | None, raw: bytes, error: str = "") -> None:
        self.sequence, self.event, self.raw, self.error = sequence, event, raw, error


class Bus:
    """A connected NATS client with JetStream; reconnects forever and logs connection changes."""

    def __init__(self, nc: NatsClient, settings: Settings) -> None:
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream(timeout=5.0, publish_async_max_pending=8192)
        self.settings = settings
        self.closing = False

    @classmethod
    async def connect(
        cls, settings: Settings, name: str, on_reconnect: Callable[[], Awaitable[None]] | None = None
    ) -> Bus:
        """Connect to `settings.nats_url` (retrying while the server starts); `on_reconnect` runs after a reconnect."""

        made: list[Bus] = []

        async def on_error(error: Exception) -> None:
            log.warning("%s: NATS error: %s", name, error)

        async def on_disconnected() -> None:
            if not (made and made[0].closing):
                log.warning("%s: disconnected from NATS; reconnecting", name)

        async def on_reconnected() -> None:
            log.info("%s: reconnected to NATS", name)
            if on_reconnect is not None:
                await on_reconnect()

        options: dict[str, Any] = {
            "name": name,
            "connect_timeout": 2,
            "allow_reconnect": True,
            "max_reconnect_attempts": -1,
            "reconnect_time_wait": 0.25,
            "error_cb": on_error,
            "disconnected_cb": on_disconnected,
            "reconnected_cb": on_reconnected,
            "pending_size": 64 * 1024 * 1024,
        }
        for attempt in range(CONNECT_ATTEMPTS):
            try:
                made.append(cls(await nats.connect(settings.nats_url, **options), settings))
                return made[0]
            except (nats.errors.NoServersError, OSError) as error:
                if attempt == CONNECT_ATTEMPTS - 1:
                    raise nats.errors.NoServersError(f"no NATS server at {settings.nats_url}: {error}") from error
                await asyncio.sleep(0.25)
        raise AssertionError("unreachable")

    async def ensure_streams(self) -> None:
        """Create the streams and the lease bucket if missing (idempotent; existing ones are left as they are)."""
        for config in STREAMS:
            try:
                await self.js.stream_info(config.name)  # type: ignore[arg-type]
            except nats.js.errors.NotFoundError:
                with contextlib.suppress(nats.js.errors.BadRequestError):  # another service made it meanwhile
                    await self.js.add_stream(config)
        try:
            await self.js.key_value(s.LEASE_BUCKET)
        except nats.js.errors.BucketNotFoundError:
            await self.js.create_key_value(bucket=s.LEASE_BUCKET, ttl=self.settings.lease_ttl, history=1)

    async def lease_bucket(self) -> KeyValue:
        """The KV bucket holding leases."""
        return await self.js.key_value(s.LEASE_BUCKET)

    # appending

    async def append(self, events: Sequence[AnyEvent], expected_last: dict[str, int] | None = None) -> list[int]:
        """Append events in order (each with `Nats-Msg-Id` = its event id); returns their stream sequences.

        Publishing is pipelined; a failed batch is retried with the same ids, so the log stores each event once.
        `expected_last` maps a subject to the sequence its last event must have (optimistic concurrency).
        """
        while True:
            try:
                return await self._append_once(events, expected_last or {})
            except (TimeoutError, nats.errors.TimeoutError, nats.errors.ConnectionClosedError) as error:
                if self.nc.is_closed:
                    raise
                log.warning("append of %d events not confirmed (%s); retrying", len(events), error)
                await asyncio.sleep(0.25)

    async def _append_once(self, events: Sequence[AnyEvent], expected_last: dict[str, int]) -> list[int]:
        futures = []
        for event in events:
            subject = subject_of(event)
            headers = telemetry.inject({"Nats-Msg-Id": event.event_id})
            if subject in expected_last:
                headers["Nats-Expected-Last-Subject-Sequence"] = str(expected_last[subject])
            futures.append(await self.js.publish_async(subject, encode(event), headers=headers))
        acks = await asyncio.wait_for(asyncio.gather(*futures), timeout=10.0)
        return [ack.seq for ack in acks]

    async def dead_letter(self, service: str, data: bytes, reason: str, subject: str = "") -> None:
        """Keep an unreadable or unappliable message on `corral.dlq.<service>` with the reason in headers."""
        headers = {"Corral-Reason": reason[:1000], "Corral-Subject": subject}
        try:
            await self.js.publish(s.dead_letter_subject(service), data, headers=headers)
        except (TimeoutError, nats.errors.Error) as error:
            log.error("dead letter from %s lost (%s): %s", service, error, reason)

    # reading the log

    async def last_sequence(self, stream: str = s.EVENTS_STREAM) -> int:
        """The sequence of the newest message in `stream` (0 when empty)."""
        info = await self.js.stream_info(stream)
        return int(info.state.last_seq)

    async def read_log(self, start: int, *, max_bytes: int = 1_048_576) -> AsyncIterator[LogEntry]:
        """Every event from sequence `start` on, in order, then new ones as they are appended (forever)."""
        config = api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE if start > 1 else api.DeliverPolicy.ALL,
            opt_start_seq=start if start > 1 else None,
        )
        sub = await self.js.subscribe(
            s.EVENTS_SUBJECTS,
            stream=s.EVENTS_STREAM,
            ordered_consumer=True,
            config=config,
            idle_heartbeat=1.0,
            pending_msgs_limit=200_000,
            pending_bytes_limit=512 * 1024 * 1024,
        )
        try:
            async for msg in sub.messages:
                yield _entry(msg, max_bytes)
        finally:
            await sub.unsubscribe()

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

    # request / reply

    async def serve(self, subject: str, handler: Callable[[Msg], Awaitable[bytes]], queue: str = "") -> Any:
        """Answer requests on `subject` (a queue group per service) with `handler`'s bytes."""

        async def respond(msg: Msg) -> None:
            with telemetry.span_from(msg.headers, subject):
                reply = await handler(msg)
            if msg.reply:
                await msg.respond(reply)

        return await self.nc.subscribe(subject, queue=queue, cb=respond)

    async def close(self) -> None:
        """Flush and close (a short drain: see STACK-NOTES on drain and JetStream subscriptions)."""
        if self.nc.is_closed:
            return
        self.closing = True
        with contextlib.suppress(TimeoutError, nats.errors.Error):
            await asyncio.wait_for(self.nc.flush(), timeout=1.0)
        await self.nc.close()


def _entry(msg: Msg, max_bytes: int) -> LogEntry:
    sequence = int(msg.metadata.sequence.stream)
    try:
        event: AnyEvent = decode(msg.data, AnyEvent, max_bytes=max_bytes)
    except CodecError as error:
        return LogEntry(sequence, None, msg.data, str(error))
    return LogEntry(sequence, event, msg.data)
