"""Serve commands: decode, validate against the view, append the events, answer once the view has folded them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import msgspec
import nats.errors
from nats.aio.msg import Msg

from schemas import AnyEvent
from schemas.replies import Accepted, Rejected
from services.core.errors import CodecError, RejectedError
from services.runtime.bus import Bus, answerable
from services.runtime.codec import decode, encode
from services.runtime.follower import LogFollower, LogReplaced
from services.runtime.room import log_full

log = logging.getLogger("corral.commands")

Outcome = Sequence[AnyEvent] | str
"""What a command handler returns: the events to append, or a message when nothing has to change."""

Responder = Callable[[Msg], Awaitable[bytes]]
"""A NATS request handler: the request in, the reply's bytes out."""

C = TypeVar("C")


def answering(msg: Msg) -> Callable[[bytes], Awaitable[None]]:
    """What answers a command's sender ahead of its reply (a second answer to its request is dropped)."""

    async def answer(data: bytes) -> None:
        if answerable(msg.reply):
            with contextlib.suppress(nats.errors.Error):  # the connection may be down: the sender times out
                await msg.respond(data)

    return answer


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

    def handler(self, kind: type[C], handle: Callable[[C], Outcome]) -> Responder:
        """A NATS request handler that reads `kind` and runs `handle` on it."""

        async def serve(msg: Msg) -> bytes:
            try:
                command: C = decode(msg.data, kind, max_bytes=self.bus.settings.max_message_bytes)
            except CodecError as error:
                return encode(rejection(error))
            return encode(await self.execute(lambda: handle(command), told=answering(msg)))

        return serve

    async def execute(
        self, handle: Callable[[], Outcome], told: Callable[[bytes], Awaitable[None]] | None = None
    ) -> Accepted | Rejected:
        """Run a handler under the lock and append what it decided.

        While the event log has no room, a command is refused at once (nothing changed); one whose append the log
        refuses for lack of room has its sender `told` so while the append is retried (it is applied once there is
        room: its later answer goes to an inbox nobody may read)."""
        if self.bus.no_room:
            return Rejected(log_full(self.bus.no_room, "nothing changed"), "storage_full")
        async with self._lock:
            unready = await not_ready(self._before)
            if unready is not None:
                return unready
            try:
                outcome = handle()
            except Exception as error:  # a bad command is refused; a bug met on it fails this one command only
                return rejection(error)
            if isinstance(outcome, str):
                return Accepted(0, outcome)
            stamped = [msgspec.structs.replace(e, event_id=f"{self.service}-{uuid.uuid4().hex}") for e in outcome]
            appended = self.bus.append(stamped)
            if told is None:
                sequences = await appended
            else:

                async def tell(reason: str) -> None:
                    outcome = "the command is applied once the log has room"
                    await told(encode(Rejected(log_full(reason, outcome), "storage_full")))

                sequences = await self.bus.told_when_full(appended, tell)
            await self.follower.wait_for(sequences[-1])
            return Accepted(sequences[-1])
