"""What the event log says about one object: its first event and that event's time (for AGE and `describe`).

The views keep no times, so an object's age is the time NATS stored its first event: on its subject
(`corral.evt.<aggregate>.<id>`), one direct stream read per object, asked for all rows at once; in a batch of its
aggregate's events (the scheduler appends actor events in batches), one read of every batch.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime

import nats.errors
import nats.js.errors

from schemas import subjects as s
from schemas.events import AnyEvent
from services.client import Client
from services.core.errors import CodecError
from services.runtime.codec import decode

AGGREGATES = {"node": s.NODE, "actor": s.ACTOR, "pg": s.PLACEMENT_GROUP, "vc": s.VCLUSTER}
"""The subject token of each kind `get` and `describe` show."""

AT_ONCE = 64
"""At most this many first-event reads in flight."""


class Record:
    """An object's first event in the log (None when it does not decode) and when it was stored."""

    __slots__ = ("event", "time")

    def __init__(self, time: datetime, event: AnyEvent | None) -> None:
        self.time, self.event = time, event


async def first_record(client: Client, kind: str, object_id: str) -> Record | None:
    """The first event the log holds about the object, or None when it holds none."""
    return (await first_records(client, kind, [object_id]))[0]


async def first_times(client: Client, kind: str, ids: list[str]) -> dict[str, datetime]:
    """Object id -> the time of its first event, for those the log holds."""
    records = await first_records(client, kind, ids)
    return {object_id: record.time for object_id, record in zip(ids, records, strict=True) if record is not None}


async def first_records(client: Client, kind: str, ids: list[str]) -> list[Record | None]:
    """Each object's first event: the first on its own subject, or an earlier one in a batch of its aggregate's
    events (those are read whole: every batch of the log once per call)."""
    gate = asyncio.Semaphore(AT_ONCE)
    aggregate = AGGREGATES[kind]

    async def one(object_id: str) -> tuple[int, Record] | None:
        async with gate:
            return await _first_on_subject(client, s.event_subject(aggregate, object_id))

    own = await asyncio.gather(*(one(object_id) for object_id in ids))
    batched = await _first_in_batches(client, aggregate, ids) if aggregate in s.BATCHED else {}
    records: list[Record | None] = []
    for object_id, on_subject in zip(ids, own, strict=True):
        in_batch = batched.get(object_id)
        first = in_batch if in_batch is not None and (on_subject is None or in_batch[0] < on_subject[0]) else on_subject
        records.append(first[1] if first is not None else None)
    return records


async def _first_on_subject(client: Client, subject: str) -> tuple[int, Record] | None:
    try:
        msg = await client.bus.js.get_msg(s.EVENTS_STREAM, seq=1, subject=subject, next=True)
    except (nats.js.errors.NotFoundError, nats.errors.TimeoutError):
        return None
    event: AnyEvent | None = None
    with contextlib.suppress(CodecError):
        event = decode(msg.data or b"", AnyEvent)
    return int(msg.seq or 0), Record(msg.time or datetime.now(UTC), event)


async def _first_in_batches(client: Client, aggregate: str, ids: list[str]) -> dict[str, tuple[int, Record]]:
    """Object id -> the sequence and record of its first event inside a batch, for those of `ids` some batch
    names."""
    wanted = {s.event_subject(aggregate, object_id): object_id for object_id in ids}
    found: dict[str, tuple[int, Record]] = {}
    async for entry in client.bus.read_held((s.batch_subject(aggregate),)):
        object_id = wanted.get(s.subject_of(entry.event)) if entry.event is not None else None
        if object_id is not None and object_id not in found:
            found[object_id] = entry.sequence, Record(datetime.fromtimestamp(entry.time_ns / 1e9, UTC), entry.event)
    return found


def age(since: datetime | None, now: datetime) -> str:
    """kubectl's AGE: `45s`, `3m12s`, `2h5m`, `4d3h` (`<unknown>` without a time)."""
    if since is None:
        return "<unknown>"
    seconds = max(0, int((now - since).total_seconds()))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60}s" if seconds < 600 else f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600}h"
