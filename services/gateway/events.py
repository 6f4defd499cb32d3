"""`GET /api/v1/events`: the event log as Server-Sent Events, from a sequence on, resumable with `Last-Event-ID`.

No stream has a consumer of its own on the bus: the past comes from the shared `Backlog`, then each stream joins
the shared `Feed` of new entries where the past ended, without a gap or a repeat. A stream that falls more than
the feed's window behind is dropped; its client resumes with `Last-Event-ID`."""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

from litestar import Request, get
from litestar.params import HeaderParameter, Parameter
from litestar.response import ServerSentEventMessage, Stream

from services.core.errors import rule_error
from services.gateway.backlog import Backlog, after_chunk
from services.gateway.feed import Feed
from services.gateway.watchers import dropped_of

KEEP_ALIVE_SECONDS = 15.0
"""A quiet stream sends a comment this often, so proxies and browsers keep it open (and a closed one is noticed)."""
KEEP_ALIVE = ServerSentEventMessage(data=None, comment="keep-alive")
"""A comment line alone (no `data:` line, which would dispatch an empty message event)."""
FELL_BEHIND = ServerSentEventMessage(
    data=None, comment="dropped: this stream fell behind the log; reconnect with Last-Event-ID to resume"
)
"""The last words of a dropped stream (a comment: no event)."""
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@dataclass(frozen=True, slots=True)
class Watching:
    """What every event stream of the gateway shares: the feed of new entries and the reader of the past."""

    feed: Feed
    backlog: Backlog


def start_of(since: int, last_event_id: str | None) -> int:
    """The first sequence to send: after `Last-Event-ID` when a reconnecting browser sends it, else `since`."""
    if last_event_id is None or not last_event_id.strip():
        return since
    given = last_event_id.strip()
    if not (given.isascii() and given.isdigit()):
        raise rule_error("Last-Event-ID", last_event_id, "must be the sequence of an event (a whole number)")
    return int(given) + 1


async def log_from(
    watching: Watching, start: int, dropped: asyncio.Event, keep_alive: float = KEEP_ALIVE_SECONDS
) -> AsyncIterator[bytes]:
    """Every event from `start` on, then each new one as it is appended, as Server-Sent Events; a keep-alive
    comment after `keep_alive` quiet seconds; ends (`dropped` set) when the stream falls out of the feed's window."""
    feed, position = watching.feed, start
    await feed.start()
    read_again = True
    while position < feed.covered_from:
        chunk = await watching.backlog.chunk_of(position)
        first = bisect_left(chunk.sequences, position)
        if first < len(chunk.sequences):
            yield b"".join(chunk.messages[first:])
            position, read_again = chunk.sequences[-1] + 1, True
        elif chunk.whole:
            position = after_chunk(position)
        elif read_again:  # read before the log reached `position`: once more
            read_again = False
        else:  # the log holds none of them (deleted): the feed has what follows
            position = feed.covered_from
    with feed.reading(position, dropped) as reader:
        while True:
            taken = feed.take(reader)
            if taken is None:
                yield FELL_BEHIND.encode()
                return
            if taken:
                yield taken
            elif not await feed.arrival(keep_alive):
                yield KEEP_ALIVE.encode()


def watching_of(request: Request[Any, Any, Any]) -> Watching:
    """The gateway's shared feed and backlog."""
    watching = request.app.state.watching
    assert isinstance(watching, Watching)
    return watching


@get("/api/v1/events", tags=["events"])
async def events(
    request: Request[Any, Any, Any],
    since: Annotated[int, Parameter(ge=1, description="the first sequence to send (1: the whole log)")] = 1,
    last_event_id: Annotated[str | None, HeaderParameter(name="Last-Event-ID")] = None,
) -> Stream:
    """The event log as `text/event-stream`: one message per event (`id` its sequence, `event` its type, `data`
    its JSON), from `since` or after `Last-Event-ID`, then live; a comment every 15 s while it is quiet. A client
    that falls far behind the log is dropped (a comment says so) and resumes with `Last-Event-ID`; past
    `CORRAL_HTTP_MAX_WATCHERS` open streams, 503 with `Retry-After`."""
    start = start_of(since, last_event_id)
    return Stream(
        log_from(watching_of(request), start, dropped_of(request.scope)),
        media_type="text/event-stream",
        headers=SSE_HEADERS,
    )
