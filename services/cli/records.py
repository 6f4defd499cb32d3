"""What the event log says about one object: its first event and that event's time (for AGE and `describe`).

The views keep no times, so an object's age is the time NATS stored the first event on its subject
(`corral.evt.<aggregate>.<id>`): one direct stream read per object, asked for all rows at once.
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
    """The first event the log holds on the object's subject, or None when it holds none."""
    subject = s.event_subject(AGGREGATES[kind], object_id)
    try:
        msg = await client.bus.js.get_msg(s.EVENTS_STREAM, seq=1, subject=subject, next=True)
    except (nats.js.errors.NotFoundError, nats.errors.TimeoutError):
        return None
    event: AnyEvent | None = None
    with contextlib.suppress(CodecError):
        event = decode(msg.data or b"", AnyEvent)
    return Record(msg.time or datetime.now(UTC), event)


async def first_times(client: Client, kind: str, ids: list[str]) -> dict[str, datetime]:
    """Object id -> the time of its first event, for those the log holds."""
    gate = asyncio.Semaphore(AT_ONCE)

    async def one(object_id: str) -> Record | None:
        async with gate:
            return await first_record(client, kind, object_id)

    records = await asyncio.gather(*(one(object_id) for object_id in ids))
    return {object_id: record.time for object_id, record in zip(ids, records, strict=True) if record is not None}


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
