"""`GET /api/v1/events`: the event log as Server-Sent Events, from a sequence on, resumable with `Last-Event-ID`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated

from litestar import get
from litestar.params import Parameter
from litestar.response import ServerSentEvent, ServerSentEventMessage

from services.client import Client
from services.core.errors import rule_error

UNREADABLE = "unreadable"
"""The SSE event name of a log entry no reader can decode (its data says why)."""


def start_of(since: int, last_event_id: str | None) -> int:
    """The first sequence to send: after `Last-Event-ID` when a reconnecting browser sends it, else `since`."""
    if last_event_id is None or not last_event_id.strip():
        return since
    if not last_event_id.strip().isdigit():
        raise rule_error("Last-Event-ID", last_event_id, "must be the sequence of an event (a whole number)")
    return int(last_event_id) + 1


async def log_from(client: Client, start: int) -> AsyncIterator[ServerSentEventMessage]:
    """Every event from `start` on, then each new one as it is appended: id the sequence, event its type."""
    async for entry in client.bus.read_log(start):
        if entry.event is None:
            yield ServerSentEventMessage(json.dumps({"error": entry.error}), event=UNREADABLE, id=entry.sequence)
        else:
            yield ServerSentEventMessage(entry.raw.decode(), event=type(entry.event).__name__, id=entry.sequence)


@get("/api/v1/events", tags=["events"])
async def events(
    client: Client,
    since: Annotated[int, Parameter(ge=1, description="the first sequence to send (1: the whole log)")] = 1,
    last_event_id: Annotated[str | None, Parameter(header="Last-Event-ID")] = None,
) -> ServerSentEvent:
    """The event log as `text/event-stream`: one message per event (`id` its sequence, `event` its type, `data`
    its JSON), from `since` or after `Last-Event-ID`, then live."""
    return ServerSentEvent(log_from(client, start_of(since, last_event_id)))
