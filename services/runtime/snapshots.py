"""The snapshot store: one blob per view in Redis with the stream sequence it reflects, kept only if newer."""

from __future__ import annotations

import logging

import redis.asyncio as redis
from redis.exceptions import RedisError

log = logging.getLogger("corral.snapshots")

_SAVE_IF_NEWER = """
local current = redis.call('HGET', KEYS[1], 'sequence')
if current and tonumber(current) >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'sequence', ARGV[1], 'blob', ARGV[2])
return 1
"""


class SnapshotStore:
    """Load and save view snapshots; an unreachable Redis is logged and treated as having none."""

    def __init__(self, url: str, timeout: float = 2.0) -> None:
        self._redis = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        self._save = self._redis.register_script(_SAVE_IF_NEWER)

    @staticmethod
    def key(view: str) -> str:
        """The Redis key of a view's snapshot."""
        return f"corral:snapshot:{view}"

    async def load(self, view: str) -> tuple[int, bytes] | None:
        """The stored (sequence, blob), or None when there is none or Redis cannot be reached."""
        try:
            found = await self._redis.hmget(self.key(view), ["sequence", "blob"])
        except (RedisError, OSError) as error:
            log.warning("snapshot store unreachable (%s): replaying the whole log", error)
            return None
        sequence, blob = found
        if sequence is None or blob is None:
            log.info("no snapshot of %s: replaying the whole log", view)
            return None
        return int(sequence), blob if isinstance(blob, bytes) else blob.encode()

    async def save(self, view: str, sequence: int, blob: bytes) -> bool:
        """Store the blob if `sequence` is newer than the stored one; False when older or Redis is down."""
        try:
            return bool(await self._save(keys=[self.key(view)], args=[sequence, blob]))
        except (RedisError, OSError) as error:
            log.warning("snapshot of %s at %d not saved: %s", view, sequence, error)
            return False

    async def close(self) -> None:
        """Close the connection pool."""
        await self._redis.aclose()
