"""A lease in NATS KV: one holder at a time, renewed before its TTL lapses; its revision is the holder's epoch."""

from __future__ import annotations

import asyncio
import logging

import nats.errors
import nats.js.errors
from nats.js.kv import KeyValue

log = logging.getLogger("corral.lease")


class LeaseLost(Exception):  # noqa: N818 - a state, like TimeoutError
    """The lease could not be renewed in time: another instance may hold it now."""


class Lease:
    """`acquire` waits until the key is free and takes it; `hold` renews it every third of the TTL."""

    def __init__(self, kv: KeyValue, key: str, instance: str, ttl: float) -> None:
        self.kv, self.key, self.instance, self.ttl = kv, key, instance, ttl
        self.revision = 0

    async def acquire(self) -> int:
        """Take the lease as soon as it is free; returns the epoch (the KV revision, always increasing)."""
        announced = False
        while True:
            try:
                self.revision = await self.kv.create(self.key, self.instance.encode())
                return self.revision
            except nats.js.errors.KeyWrongLastSequenceError:
                if not announced:
                    log.info("%s: lease %s is held; standing by", self.instance, self.key)
                    announced = True
            except (TimeoutError, nats.errors.Error) as error:
                log.warning("%s: lease %s not reachable (%s)", self.instance, self.key, error)
            await asyncio.sleep(self.ttl / 4)

    async def hold(self) -> None:
        """Renew until cancelled; raises `LeaseLost` when a renewal fails or comes too late."""
        while True:
            await asyncio.sleep(self.ttl / 3)
            try:
                self.revision = await asyncio.wait_for(
                    self.kv.update(self.key, self.instance.encode(), last=self.revision), timeout=self.ttl / 3
                )
            except (TimeoutError, nats.errors.Error, nats.js.errors.Error) as error:
                raise LeaseLost(f"lease {self.key} not renewed: {error or type(error).__name__}") from error

    async def release(self) -> None:
        """Give the lease up now so a standby takes over without waiting for the TTL."""
        try:
            await asyncio.wait_for(self.kv.delete(self.key, last=self.revision), timeout=1.0)
        except (TimeoutError, nats.errors.Error, nats.js.errors.Error) as error:
            log.warning("%s: lease %s not released (%s); it lapses by itself", self.instance, self.key, error)
