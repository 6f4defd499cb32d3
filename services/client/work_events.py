"""A wake-up for a wait on one object: the log got an event about it, on the object's own subject or inside a batch
of its aggregate's events that names it (`subjects.BATCHED`)."""

from __future__ import annotations

import asyncio
import contextlib

import nats.errors
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from schemas import subjects as s
from services.runtime.codec import encode


class WorkEvents:
    """Set when an event about the object is appended; `next` waits for the next one (or a timeout)."""

    def __init__(self) -> None:
        self._heard = asyncio.Event()
        self._subs: list[Subscription] = []

    @classmethod
    async def open(cls, nc: NatsClient, aggregate: str, object_id: str) -> WorkEvents:
        """Listen for the events of `object_id` (of log aggregate `aggregate`)."""
        events = cls()
        named = encode(object_id)  # as the id appears in an event's JSON

        async def on_own(_msg: Msg) -> None:
            events._heard.set()

        async def on_batch(msg: Msg) -> None:
            if named in msg.data:  # may name it in another field too: one look more, never one less
                events._heard.set()

        events._subs.append(await nc.subscribe(s.event_subject(aggregate, object_id), cb=on_own))
        if aggregate in s.BATCHED:
            events._subs.append(await nc.subscribe(s.batch_subject(aggregate), cb=on_batch))
        return events

    async def next(self, timeout: float) -> None:
        """Return once an event about the object came since the last call, or after `timeout` seconds."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._heard.wait(), timeout)
        self._heard.clear()

    async def close(self) -> None:
        """Stop listening."""
        for sub in self._subs:
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()
