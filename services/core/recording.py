"""How the core keeps its events for the log: an actor placed as it is submitted is one event (pure)."""

from __future__ import annotations

import msgspec

from schemas import ActorPlaced, ActorSubmitted, AnyEvent, VirtualNodeResized


def merge_placement(events: list[AnyEvent], untaken: int, placed: ActorPlaced) -> bool:
    """Fold `placed` into its actor's `ActorSubmitted` among `events[untaken:]`, when nothing but the growth of
    virtual nodes that made room for it was recorded in between; True when merged.

    The submission's place goes to the growth, then to the placement carrying the request, so the log reads
    grow, then place. Ids shift down by one to stay contiguous (the caller gives the placement's id back), and
    the first event takes over the submission's cause, so every event's cause comes before it.
    """
    at = _submission(events, untaken, placed.actor_id)
    if at is None:
        return False
    submitted = events[at]
    assert isinstance(submitted, ActorSubmitted)
    growth = events[at + 1 :]
    ids = [submitted.event_id, *(step.event_id for step in growth)]
    moved = [
        msgspec.structs.replace(
            step, event_id=ids[index], causation_id=submitted.causation_id if index == 0 else step.causation_id
        )
        for index, step in enumerate(growth)
    ]
    merged = msgspec.structs.replace(
        placed,
        request=submitted.request,
        event_id=ids[-1],
        causation_id=placed.causation_id if growth else submitted.causation_id,
    )
    events[at:] = [*moved, merged]
    return True


def _submission(events: list[AnyEvent], untaken: int, actor_id: str) -> int | None:
    """Where `actor_id` was submitted, if only virtual-node resizes follow it (among `events[untaken:]`)."""
    for index in range(len(events) - 1, untaken - 1, -1):
        event = events[index]
        if isinstance(event, ActorSubmitted):
            return index if event.request.actor_id == actor_id else None
        if not isinstance(event, VirtualNodeResized):
            return None
    return None
