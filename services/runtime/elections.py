"""The record of real elections: a `SchedulerElected` counts only if the lease that produced it left a record.

The lease bucket keeps only the current holder (a TTL, one revision), so it cannot tell a reader later whether an
epoch was ever won. Each winner therefore writes a record into `ELECTIONS_BUCKET` (no TTL, never deleted), keyed by
its epoch and naming its instance and the election's event id, BEFORE it appends the `SchedulerElected`. Any reader
at any later time finds the same record, so every view takes or skips an election alike; an election without a
matching record (forged, or published by hand) is skipped like any unfoldable event.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

import msgspec
import nats.errors
import nats.js.errors
from nats.js import JetStreamContext

from schemas import SchedulerElected
from schemas import subjects as s
from services.core.errors import CodecError
from services.runtime.codec import decode
from services.runtime.replicas import key_value

log = logging.getLogger("corral.elections")

RETRY_SECONDS = 0.25
"""Pause between tries while the record store does not answer (a verdict is never guessed)."""


class ElectionRecord(msgspec.Struct, frozen=True):
    """What the winner of epoch `key` wrote: its instance and the id of its `SchedulerElected`."""

    instance: str
    event_id: str


def new_election(epoch: int, instance: str) -> SchedulerElected:
    """The election of `instance` at `epoch`; its event id carries a random part nobody can know in advance."""
    return SchedulerElected(epoch=epoch, instance=instance, event_id=f"scheduler-elected-{epoch}-{uuid.uuid4().hex}")


def _subject(epoch: int) -> str:
    return f"$KV.{s.ELECTIONS_BUCKET}.{epoch}"


async def record_election(js: JetStreamContext, elected: SchedulerElected, *, replicas: int = 1) -> None:
    """Write the record of `elected` (creating the bucket if missing, on `replicas` servers); call before appending
    the event.

    Retries while NATS does not answer; raises `KeyWrongLastSequenceError` when the epoch holds another record.
    """
    record = ElectionRecord(elected.instance, elected.event_id)
    while True:
        try:
            kv = await key_value(js, s.ELECTIONS_BUCKET, replicas, history=1)
            try:
                await kv.create(str(elected.epoch), msgspec.json.encode(record))
            except nats.js.errors.KeyWrongLastSequenceError:
                found = await kv.get(str(elected.epoch))
                if _readable(found.value) != record:  # another's, or garbage: this epoch is not ours
                    raise
            return  # written now, or by an earlier try whose answer was lost
        except nats.js.errors.KeyWrongLastSequenceError:
            raise
        except (TimeoutError, nats.errors.Error) as error:
            log.warning("election %d not recorded yet (%s); retrying", elected.epoch, error or type(error).__name__)
            await asyncio.sleep(RETRY_SECONDS)


def _readable(data: bytes | None) -> ElectionRecord | None:
    """A stored record, or None when what is stored is not one (anyone who may write the bucket could write it)."""
    try:
        record: ElectionRecord = decode(data or b"", ElectionRecord)
    except CodecError:
        return None
    return record


class ElectionCheck:
    """Tells whether a `SchedulerElected` read from the log was produced by a lease; remembers each verdict."""

    def __init__(self, js: JetStreamContext, reader: str) -> None:
        self.js, self.reader = js, reader
        self._verdicts: dict[tuple[int, str, str], str] = {}

    async def why_not(self, elected: SchedulerElected) -> str:
        """Empty when the election is genuine, else why it is not; waits while the record store is unreachable."""
        key = (elected.epoch, elected.instance, elected.event_id)
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = self._verdicts[key] = _compare(elected, await self._record(elected.epoch))
        return verdict

    async def _record(self, epoch: int) -> ElectionRecord | None:
        warned = False
        while True:
            try:
                raw = await self.js.get_last_msg(f"KV_{s.ELECTIONS_BUCKET}", _subject(epoch))
                return _readable(raw.data)
            except nats.js.errors.NotFoundError:
                return None
            except (TimeoutError, nats.errors.Error) as error:
                if not warned:
                    log.warning("%s: election record %d not reachable (%s); waiting", self.reader, epoch, error)
                    warned = True
                await asyncio.sleep(RETRY_SECONDS)


def _compare(elected: SchedulerElected, record: ElectionRecord | None) -> str:
    if record is None:
        return f"forged election: no lease produced epoch {elected.epoch} (no record in {s.ELECTIONS_BUCKET})"
    if (record.instance, record.event_id) != (elected.instance, elected.event_id):
        return (
            f"forged election: epoch {elected.epoch} was won by {record.instance!r} ({record.event_id}), "
            f"not by {elected.instance!r} ({elected.event_id})"
        )
    return ""
