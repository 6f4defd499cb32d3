"""The snapshot store: one record per view in Redis, the view's blob with where it came from.

A record holds the blob, the stream sequence it reflects, the identity of the log it was folded from (the event
stream's creation time: a store lost and made again is a new log), the service that wrote it, the snapshot
version, and a seal: a hash over all of these and the blob, so that a record bent in any part (a flipped bit, a
blob or field from another record) is refused, never loaded as a different view. A newer snapshot of the same
log, service and version is never replaced by an older one (standby schedulers share a key); a record of anything
else, one a service refused, or a key of another Redis type is replaced by the next save.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from dataclasses import dataclass

import redis.asyncio as redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError, ResponseError

from schemas.snapshots import SNAPSHOT_VERSION

log = logging.getLogger("corral.snapshots")

_FIELDS = ["sequence", "blob", "log", "service", "version", "seal"]

_SAVE_IF_NEWER = """
if redis.call('TYPE', KEYS[1]).ok == 'hash' then
  local stored = redis.call('HMGET', KEYS[1], 'sequence', 'log', 'service', 'version', 'refused')
  local sequence = tonumber(stored[1])
  if sequence and not stored[5] and stored[2] == ARGV[3] and stored[3] == ARGV[4] and stored[4] == ARGV[5]
     and sequence >= tonumber(ARGV[1]) then
    return 0
  end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'sequence', ARGV[1], 'blob', ARGV[2],
           'log', ARGV[3], 'service', ARGV[4], 'version', ARGV[5], 'seal', ARGV[6])
return 1
"""

_REFUSE = """
if redis.call('HGET', KEYS[1], 'sequence') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'refused', ARGV[2])
  return 1
end
return 0
"""


@dataclass(frozen=True)
class StoredSnapshot:
    """A record as Redis holds it (fields a record lacks are empty)."""

    sequence: str
    blob: bytes
    log: str
    service: str
    version: str
    seal: str

    def refusal(self, service: str, log_id: str, log_end: int) -> str | None:
        """Why `service`, reading the log `log_id` that ends at `log_end`, must not load this (None: it may)."""
        if self.version != str(SNAPSHOT_VERSION):
            return f"snapshot version {self.version or 'none'}: this build reads version {SNAPSHOT_VERSION}"
        if self.service != service:
            return f"written by {self.service or 'an unnamed service'}, not by {service}"
        if self.log != log_id:
            return f"folded from the log created {self.log or 'at an unknown time'}; this log was created {log_id}"
        if not (self.sequence.isascii() and self.sequence.isdigit()):  # "²" is a digit to isdigit, not to int
            return f"sequence {self.sequence!r} is not a sequence number"
        if int(self.sequence) > log_end:
            return f"claims sequence {self.sequence}, past the log's end at {log_end}"
        if self.seal != seal(self.sequence, self.blob, self.log, self.service, self.version):
            return f"seal {self.seal or 'missing'}: the record is not as it was saved (corrupt or mixed up)"
        return None


def seal(sequence: str, blob: bytes, log_id: str, service: str, version: str) -> str:
    """A hash binding a record's blob to its fields."""
    sealed = hashlib.blake2b(blob, digest_size=16)
    for text in (sequence, log_id, service, version):
        sealed.update(b"\0" + text.encode())
    return sealed.hexdigest()


def _reason(error: BaseException) -> str:
    """What went wrong, in words (a timeout of `asyncio.timeout` has none of its own)."""
    if isinstance(error, TimeoutError) and not str(error):
        return "Redis did not answer in time"
    return str(error) or type(error).__name__


def _text(value: bytes | str | None) -> str:
    return "" if value is None else value.decode(errors="replace") if isinstance(value, bytes) else value


class SnapshotStoreError(Exception):
    """Redis did not take a save: down, refusing writes (read-only, out of memory) or not answering in time."""


class SnapshotStore:
    """Load and save view snapshots, each call bounded by `timeout` seconds and tried once (a hung Redis costs
    that long, never more); an unreachable Redis is logged and treated as having none."""

    def __init__(self, url: str, timeout: float = 2.0) -> None:
        self._timeout = timeout
        self._redis = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0)
        )
        self._save = self._redis.register_script(_SAVE_IF_NEWER)
        self._refuse = self._redis.register_script(_REFUSE)

    @staticmethod
    def key(view: str) -> str:
        """The Redis key of a view's snapshot."""
        return f"corral:snapshot:{view}"

    async def load(self, view: str) -> StoredSnapshot | None:
        """The stored record, or None when there is none or Redis cannot be reached."""
        try:
            async with asyncio.timeout(self._timeout):
                found = await self._redis.hmget(self.key(view), _FIELDS)
        except ResponseError as error:  # the key holds another Redis type: the next save replaces it
            log.warning("snapshot of %s unreadable (%s): replaying the whole log", view, error)
            return None
        except (RedisError, OSError, TimeoutError) as error:
            log.warning("snapshot store unreachable (%s): replaying the whole log", _reason(error))
            return None
        sequence, blob, log_id, service, version, sealed = found
        if sequence is None or blob is None:
            log.info("no snapshot of %s: replaying the whole log", view)
            return None
        blob = blob if isinstance(blob, bytes) else blob.encode()
        return StoredSnapshot(_text(sequence), blob, _text(log_id), _text(service), _text(version), _text(sealed))

    async def refuse(self, view: str, stored: StoredSnapshot, reason: str) -> None:
        """Mark a record as refused (unless replaced meanwhile), so that the next save replaces it."""
        try:
            async with asyncio.timeout(self._timeout):
                await self._refuse(keys=[self.key(view)], args=[stored.sequence, reason])
        except (RedisError, OSError, TimeoutError) as error:
            log.warning("snapshot of %s not marked refused: %s", view, _reason(error))

    async def save(self, view: str, sequence: int, blob: bytes, log_id: str) -> bool:
        """Store the blob unless a snapshot of the same log, view and version at `sequence` or later is stored
        (then False); `SnapshotStoreError` saying why when Redis does not take it."""
        sealed = seal(str(sequence), blob, log_id, view, str(SNAPSHOT_VERSION))
        args: list[bytes | str | int] = [sequence, blob, log_id, view, SNAPSHOT_VERSION, sealed]
        try:
            async with asyncio.timeout(self._timeout):
                return bool(await self._save(keys=[self.key(view)], args=args))
        except (RedisError, OSError, TimeoutError) as error:
            raise SnapshotStoreError(_reason(error)) from error

    async def close(self) -> None:
        """Close the connection pool."""
        await self._redis.aclose()
