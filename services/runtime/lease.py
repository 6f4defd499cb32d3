"""A lease in NATS KV: one holder at a time, renewed before its TTL lapses; its revision is the holder's epoch."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable

import nats.errors
import nats.js.errors
from nats.js.kv import KeyValue

log = logging.getLogger("corral.lease")


RETRIES_PER_TTL = 12
"""How often a TTL a failed renewal is tried again: a renewal whose answer is slower than a third of the TTL (a
busy event loop, a slow server) is retried well before the key lapses, a full TTL after the last write."""


class LeaseLost(Exception):  # noqa: N818 - a state, like TimeoutError
    """Another instance holds the lease now."""


class Lease:
    """`acquire` waits until the key is free and takes it; `hold` renews it every third of the TTL.

    The value names the instance plus a token of this process, so a renewal whose answer was lost is recognised
    as ours afterwards and never mistaken for another holder.
    """

    def __init__(
        self,
        kv: KeyValue,
        key: str,
        instance: str,
        ttl: float,
        *,
        floor: Callable[[], int] = lambda: 0,
        bucket: Callable[[], Awaitable[KeyValue]] | None = None,
    ) -> None:
        self.kv, self.key, self.instance, self.ttl = kv, key, instance, ttl
        self.value = f"{instance} {uuid.uuid4().hex}".encode()
        self.revision = 0
        self.floor = floor
        """The newest epoch the log has seen: an epoch won must be above it (a bucket made again starts at 1)."""
        self.bucket = bucket
        """Gets the bucket, making it again when it is missing (deleted by an operator, say)."""

    async def acquire(self) -> int:
        """Take the lease as soon as it is free; returns the epoch (the KV revision, always increasing)."""
        announced = unreachable = False
        while True:
            try:
                self.revision = await self.kv.create(self.key, self.value)
                if await self._above_floor():
                    return self.revision
                continue
            except nats.js.errors.KeyWrongLastSequenceError:
                if not announced:
                    log.info("%s: lease %s is held; standing by", self.instance, self.key)
                    announced = True
            except (TimeoutError, nats.errors.Error) as error:
                if not unreachable:
                    log.warning("%s: lease %s not reachable (%s); retrying", self.instance, self.key, error)
                    unreachable = True
                await self._bucket_again(error)
            await asyncio.sleep(self.ttl / 4)

    async def _above_floor(self) -> bool:
        """Whether the revision just won is above every epoch of the log; if not (the bucket was made again), the
        bucket's revisions are moved past that epoch (our key goes with them) and the lease must be taken again."""
        floor = self.floor()
        if self.revision > floor:
            return True
        log.warning(
            "%s: lease %s won at revision %d, not above the log's epoch %d (its bucket was made again): "
            "moving its revisions past it",
            self.instance,
            self.key,
            self.revision,
            floor,
        )
        await self.kv._js.purge_stream(self.kv._stream, seq=floor + 1)  # nats-py internals: the bucket's stream
        return False

    async def _bucket_again(self, error: Exception) -> None:
        """After an error saying the bucket's stream is missing, declare it again (when we know how)."""
        gone = isinstance(error, nats.js.errors.NoStreamResponseError | nats.js.errors.BucketNotFoundError)
        if gone and self.bucket is not None:
            with contextlib.suppress(TimeoutError, nats.errors.Error):
                self.kv = await self.bucket()

    async def hold(self, rewon: Callable[[int], None]) -> None:
        """Renew until cancelled; raises `LeaseLost` only once another instance holds the key.

        While NATS does not answer, renewal goes on trying: the key is ours as long as its revision is the one we
        wrote last, however long the outage lasted. When the key lapsed meanwhile and is free, it is taken again
        and `rewon(epoch)` is told the new epoch (the holder must be elected again under it).
        """
        loop = asyncio.get_running_loop()
        renewed_at = loop.time()
        warned = False
        pause = self.ttl / 3
        while True:
            await asyncio.sleep(pause)
            pause = self.ttl / RETRIES_PER_TTL  # a renewal that failed is tried again soon, not a third later
            try:
                try:
                    self.revision = await asyncio.wait_for(
                        self.kv.update(self.key, self.value, last=self.revision), timeout=self.ttl / 3
                    )
                except nats.js.errors.KeyWrongLastSequenceError:
                    if await self._taken_again():
                        rewon(self.revision)
                renewed_at, warned, pause = loop.time(), False, self.ttl / 3
            except (TimeoutError, nats.errors.Error) as error:
                await self._bucket_again(error)
                late = loop.time() - renewed_at
                if late >= self.ttl and not warned:
                    why = str(error) or type(error).__name__
                    log.warning("%s: lease %s not renewed for %.1fs (%s); retrying", self.instance, self.key, late, why)
                    warned = True

    async def _taken_again(self) -> bool:
        """After a renewal found the key changed: adopt our own late write, or take the lapsed key anew (True);
        raises `LeaseLost` when another instance holds it."""
        try:
            entry = await self.kv.get(self.key)
        except nats.js.errors.KeyNotFoundError:
            entry = None
        if entry is not None and entry.value == self.value and entry.revision is not None:
            self.revision = entry.revision  # a renewal of ours whose answer was lost
            return False
        if entry is not None:
            raise LeaseLost(f"lease {self.key} is held by {(entry.value or b'').decode(errors='replace')}")
        try:
            self.revision = await self.kv.create(self.key, self.value)
            while not await self._above_floor():
                self.revision = await self.kv.create(self.key, self.value)
        except nats.js.errors.KeyWrongLastSequenceError as error:
            raise LeaseLost(f"lease {self.key} lapsed and another instance took it") from error
        log.warning("%s: lease %s had lapsed; taken again at epoch %d", self.instance, self.key, self.revision)
        return True

    async def held(self) -> bool:
        """Whether the key still holds this instance's value (the lease is ours), as NATS answers now."""
        try:
            entry = await self.kv.get(self.key)
        except nats.js.errors.KeyNotFoundError:
            return False
        return entry.value == self.value

    async def release(self) -> None:
        """Give the lease up now so a standby takes over without waiting for the TTL."""
        try:
            await asyncio.wait_for(self.kv.delete(self.key, last=self.revision), timeout=1.0)
        except (TimeoutError, nats.errors.Error, nats.js.errors.Error) as error:
            log.warning("%s: lease %s not released (%s); it lapses by itself", self.instance, self.key, error)
