"""The event streams' door: at most `CORRAL_HTTP_MAX_WATCHERS` open at once (503 with `Retry-After` past it), and
a dropped stream's connection closed even when its client has stopped reading."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, MutableMapping
from typing import Any

from services.gateway.errors import ApiError, send_error
from services.gateway.measure import ASGIApp, Message, Receive, Send

EVENTS_PATH = "/api/v1/events"
DROPPED = "corral.dropped"
"""The scope key of the event a stream's feed sets when it drops the stream."""
RETRY_AFTER_S = 5
"""What a refused stream's `Retry-After` says."""
CLOSE_AFTER_DROP_S = 1.0
"""How long a dropped stream has to end by itself before its connection is closed (a client that reads nothing
never lets its last write finish)."""


def dropped_of(scope: Mapping[str, object]) -> asyncio.Event:
    """The event that drops this stream (a fresh one outside `watched`, as in a test of the app alone)."""
    dropped = scope.get(DROPPED)
    return dropped if isinstance(dropped, asyncio.Event) else asyncio.Event()


def watched(app: Any, max_watchers: int) -> ASGIApp:
    """`app` with its event streams counted and capped, and closed once dropped."""
    open_streams = 0

    async def watching(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        nonlocal open_streams
        if scope["type"] != "http" or scope["path"] != EVENTS_PATH:
            await app(scope, receive, send)
            return
        if open_streams >= max_watchers:
            await refuse(send, max_watchers)
            return
        open_streams += 1
        dropped = asyncio.Event()
        scope[DROPPED] = dropped
        try:
            await app(scope, until_dropped(receive, dropped), send)
        finally:
            open_streams -= 1

    return watching


def until_dropped(receive: Receive, dropped: asyncio.Event) -> Receive:
    """`receive`, which also says the client left `CLOSE_AFTER_DROP_S` after the stream was dropped (Litestar then
    stops the stream, even one stuck writing to a client that reads nothing)."""

    async def receiving() -> Message:
        asked = asyncio.ensure_future(receive())
        told = asyncio.ensure_future(dropped.wait())
        try:
            done, _ = await asyncio.wait({asked, told}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            told.cancel()
            if not asked.done():
                asked.cancel()
        if asked in done:
            return asked.result()
        await asyncio.sleep(CLOSE_AFTER_DROP_S)
        return {"type": "http.disconnect"}

    return receiving


async def refuse(send: Send, max_watchers: int) -> None:
    """503 with `Retry-After`: the gateway has its most open streams."""
    message = (
        f"the gateway serves at most {max_watchers} event streams at once (CORRAL_HTTP_MAX_WATCHERS); "
        f"try again in {RETRY_AFTER_S} s"
    )
    await send_error(send, ApiError(message, "unavailable", 503), [(b"retry-after", str(RETRY_AFTER_S).encode())])
