"""An actor's history as a story, one line per step: submitted, pending and why, placed (after what), failed,
restarted, removed. `corral describe actor` ends with it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from schemas import ActorFailed, ActorPending, ActorPlaced, ActorRemoved, ActorSubmitted
from services.client.history import LoggedEvent


def clock(moment: datetime, now: datetime | None = None) -> str:
    """`12:01:03` for a time today (UTC), else `2026-11-25 12:01:03`."""
    moment = moment.astimezone(UTC)
    today = (now or datetime.now(UTC)).date()
    return moment.strftime("%H:%M:%S" if moment.date() == today else "%Y-%m-%d %H:%M:%S")


def history_lines(events: Sequence[LoggedEvent], now: datetime | None = None) -> list[str]:
    """The story of one actor from the events that touched it (oldest first): `12:01:03 submitted`, `12:01:03
    pending: 0/12 nodes are available: ...`, `12:01:09 placed on n4 after n7 was added`, `failed with n4 (...)`,
    `restarted on n2`; other events keep their one-line meaning."""
    lines = []
    failed = False
    for logged in events:
        event = logged.event
        after = f" after {logged.cause}" if logged.cause else ""
        if isinstance(event, ActorSubmitted):
            step = "submitted"
        elif isinstance(event, ActorPlaced):
            verb = "restarted on" if failed else "placed on"
            step = f"{'submitted and ' if event.request is not None else ''}{verb} {event.node_id}{after}"
            failed = False
        elif isinstance(event, ActorPending):
            step = f"pending: {event.explanation.message}"
        elif isinstance(event, ActorFailed):
            where = f" with {event.node_id}" if event.node_id else ""
            step = f"failed{where} ({event.reason})" + ("" if event.will_restart else ", for good")
            failed = event.will_restart
        elif isinstance(event, ActorRemoved):
            step = "removed"
        else:
            step = logged.meaning
        lines.append(f"{clock(logged.time, now)}  {step}")
    return lines
