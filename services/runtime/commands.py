"""Serve commands: decode, validate against the view, append the events, answer once the view has folded them."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import msgspec
from nats.aio.msg import Msg

from schemas import AnyEvent
from schemas.replies import Accepted, Rejected
from services.core.errors import CodecError, RejectedError
from services.runtime.bus import Bus
from services.runtime.codec import decode, encode
from services.runtime.follower import LogFollower, LogReplaced
from services.runtime.room import log_full

log = logging.getLogger("corral.commands")


@dataclass(frozen=True)
class Noted:
    """Events to append, and what the sender should know about them."""

    events: Sequence[AnyEvent]
    message: str


Outcome = Sequence[AnyEvent] | str | Noted
"""What a command handler returns: the events to append (noted or not), or a message when nothing has to change."""

Responder = Callable[[Msg], Awaitable[bytes]]
"""A NATS request handler: the request in, the reply's bytes out."""

C = TypeVar("C")


def rejection(error: Exception) -> Rejected:
    """The reply for a refused command or query: the error text, and its kind.

    Only a `RejectedError` is the sender's fault. Any other error is a bug met on this one message: it is logged
    with its trace, and the reply says the service failed (the process goes on serving everyone else).
    """
    if isinstance(error, RejectedError):
        return Rejected(str(error), error.kind)
    log.error("failed on one message", exc_info=error)
    return Rejected(f"the service failed on this message ({type(error).__name__}: {error})", "unavailable")


async def not_ready(before: Callable[[], Awaitable[None]] | None) -> Rejected | None:
    """Run `before` (fold the log up to its end, say): None, or the reply saying why the service cannot answer."""
    if before is None:
        return None
    try:
        await before()
    except TimeoutError:
        return Rejected("the view did not catch up with the log in time; retry", "unavailable")
    except LogReplaced as replaced:
        return Rejected(str(replaced), "unavailable")
    return None


class CommandDesk:
    """One command at a time: validate, append, wait until folded (so the next command sees it), reply."""

    def __init__(
        self, bus: Bus, follower: LogFollower, service: str, *, before: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        self.bus, self.follower, self.service = bus, follower, service
        self._before = before
        """Runs under the lock before each handler (for example: fold the log up to its end, to see other writers)."""
        self._lock = asyncio.Lock()
        self._pending: set[asyncio.Future[int]] = set()
        """The append of a command answered while the log had no room, still retried (kept from the collector)."""

    def handler(self, kind: type[C], handle: Callable[[C], Outcome]) -> Responder:
        """A NATS request handler that reads `kind` and runs `handle` on it."""

        async def serve(msg: Msg) -> bytes:
            try:
                command: C = decode(msg.data, kind, max_bytes=self.bus.settings.max_message_bytes)
            except CodecError as error:
                return encode(rejection(error))
            return encode(await self.execute(lambda: handle(command)))

        return serve

    async def execute(self, handle: Callable[[], Outcome]) -> Accepted | Rejected:
        """Run a handler under the lock and append what it decided.

        While the event log has no room, a command is refused at once (nothing changed). One whose append the log
        refuses for lack of room is answered so at once too, and applied once there is room: its append goes on
        being retried, holding the lock (the next command waits for it, or is refused while there is no room)."""
        if self.bus.no_room:
            return Rejected(log_full(self.bus.no_room, "nothing changed"), "storage_full")
        await self._lock.acquire()
        held = True
        try:
            unready = await not_ready(self._before)
            if unready is not None:
                return unready
            try:
                outcome = handle()
            except Exception as error:  # a bad command is refused; a bug met on it fails this one command only
                return rejection(error)
            if isinstance(outcome, str):
                return Accepted(0, outcome)
            events, message = (outcome.events, outcome.message) if isinstance(outcome, Noted) else (outcome, "")
            stamped = [msgspec.structs.replace(e, event_id=f"{self.service}-{uuid.uuid4().hex}") for e in events]
            applied = asyncio.ensure_future(self._applied(stamped))
            full = await self.bus.done_or_full(applied)
            if not full:
                return Accepted(await applied, message)
            held = False
            self._pending.add(applied)
            applied.add_done_callback(self._applied_later)
            return Rejected(log_full(full, "the command is applied once the log has room"), "storage_full")
        finally:
            if held:
                self._lock.release()

    async def _applied(self, events: Sequence[AnyEvent]) -> int:
        """Append `events` and wait until the view folded them; the last one's sequence."""
        sequences = await self.bus.append(events)
        await self.follower.wait_for(sequences[-1])
        return sequences[-1]

    def _applied_later(self, applied: asyncio.Future[int]) -> None:
        """A command's append that waited for room is over: the lock is free (a failure is logged)."""
        self._pending.discard(applied)
        self._lock.release()
        if not applied.cancelled() and applied.exception() is not None:
            log.error("a command waiting for room in the log failed", exc_info=applied.exception())
