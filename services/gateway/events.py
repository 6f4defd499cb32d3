"""`GET /api/v1/events`: the event log as Server-Sent Events, from a sequence on, resumable with `Last-Event-ID`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Annotated

from litestar import get
from litestar.params import HeaderParameter, Parameter
from litestar.response import ServerSentEvent, ServerSentEventMessage

from services.client import Client
from services.core.errors import rule_error

UNREADABLE = "unreadable"
"""The SSE event name of a log entry no reader can decode (its data says why)."""
KEEP_ALIVE_SECONDS = 15.0
"""A quiet stream sends a comment this often, so proxies and browsers keep it open (and a closed one is noticed)."""
KEEP_ALIVE = ServerSentEventMessage(data=None, comment="keep-alive")
"""A comment line alone (no `data:` line, which would dispatch an empty message event)."""


def start_of(since: int, last_event_id: str | None) -> int:
    """The first sequence to send: after `Last-Event-ID` when a reconnecting browser sends it, else `since`."""
    if last_event_id is None or not last_event_id.strip():
        return since
    if not last_event_id.strip().isdigit():
        raise rule_error("Last-Event-ID", last_event_id, "must be the sequence of an event (a whole number)")
    return int(last_event_id) + 1


async def log_from(client: Client, start: int) -> AsyncGenerator[ServerSentEventMessage]:
    """Every event from `start` on, then each new one as it is appended: id the sequence, event its type."""
    async for entry in client.bus.read_log(start):
        if entry.event is None:
            yield ServerSentEventMessage(json.dumps({"error": entry.error}), event=UNREADABLE, id=entry.sequence)
        else:
            yield ServerSentEventMessage(entry.raw.decode(), event=type(entry.event).__name__, id=entry.sequence)


async def kept_alive(
    messages: AsyncGenerator[ServerSentEventMessage], interval: float = KEEP_ALIVE_SECONDS
) -> AsyncIterator[ServerSentEventMessage]:
    """The messages, with a `: keep-alive` comment after each `interval` seconds without one; closing this closes
    them."""
    following: asyncio.Future[ServerSentEventMessage] | None = None
    try:
        while True:
            if following is None:
                following = asyncio.ensure_future(anext(messages))
            done, _ = await asyncio.wait({following}, timeout=interval)
            if not done:
                yield KEEP_ALIVE
                continue
            try:
                message = following.result()
            except StopAsyncIteration:
                return
            following = None
            yield message
    finally:
        if following is not None:
            following.cancel()
            await asyncio.wait({following})
        await messages.aclose()


@get("/api/v1/events", tags=["events"])
async def events(
    client: Client,
    since: Annotated[int, Parameter(ge=1, description="the first sequence to send (1: the whole log)")] = 1,
    last_event_id: Annotated[str | None, HeaderParameter(name="Last-Event-ID")] = None,
) -> ServerSentEvent:
    """The event log as `text/event-stream`: one message per event (`id` its sequence, `event` its type, `data`
    its JSON), from `since` or after `Last-Event-ID`, then live; a comment every 15 s while it is quiet."""
    return ServerSentEvent(kept_alive(log_from(client, start_of(since, last_event_id))))
