"""How the core keeps its events for the log: fewer, fuller events for the commonest decisions (pure).

- An actor placed as it is submitted is one `ActorPlaced` carrying its request.
- The growth of flexible virtual nodes that makes room for a placement rides on that `ActorPlaced`
  (`resized`, applied before it), and the shrink a removal allows rides on that `ActorRemoved` (applied after it).

Only the newest events of the current command are merged (none has been taken for the log yet), and the merged
event keeps the order in which everything is applied, the id of the first event it replaces (ids stay contiguous:
the caller gives back one id per event absorbed) and that event's cause.
"""

from __future__ import annotations

import msgspec

from schemas import ActorPlaced, ActorRemoved, ActorSubmitted, AnyEvent, VirtualNodeResized, VirtualNodeSize


class Journal:
    """The events a cluster wrote (and, keeping its history, folded), in order, and how many were taken."""

    __slots__ = ("events", "keep_history", "taken")

    def __init__(self, history: list[AnyEvent] | None = None, *, keep_history: bool = True) -> None:
        self.keep_history = keep_history
        """Whether taken events stay (for `history`); otherwise they are dropped as they are taken."""
        self.events: list[AnyEvent] = list(history or [])
        self.taken = len(self.events)
        """How many of `events` were taken for the log (always 0 without `keep_history`)."""

    def write(self, event: AnyEvent) -> int:
        """Keep an event this cluster wrote, merged with the newest untaken ones it can carry; how many it absorbed."""
        return append_merged(self.events, self.taken, event)

    def folded(self, event: AnyEvent) -> None:
        """Note an event another writer appended (already in the log: kept only as history)."""
        if self.keep_history:
            self.events.append(event)
            self.taken = len(self.events)

    def take(self) -> list[AnyEvent]:
        """The events written since the last call, in order."""
        taken = self.events[self.taken :]
        if self.keep_history:
            self.taken = len(self.events)
        else:
            self.events.clear()
        return taken

    def has_untaken(self) -> bool:
        """Whether `take` would return anything."""
        return len(self.events) > self.taken


def append_merged(events: list[AnyEvent], untaken: int, event: AnyEvent) -> int:
    """Keep `event` at the end of `events` (whose entries from `untaken` on are not in the log yet), merged with
    what it can carry; how many events it absorbed."""
    if isinstance(event, VirtualNodeResized):
        last = events[-1] if len(events) > untaken else None
        if isinstance(last, ActorRemoved):
            events[-1] = msgspec.structs.replace(last, resized=[*last.resized, _size(event)])
            return 1
    elif isinstance(event, ActorPlaced):
        start = _placement_span(events, untaken, event.actor_id)
        if start < len(events):
            span = events[start:]
            first = span[0]
            request = first.request if isinstance(first, ActorSubmitted) else event.request
            growth = [_size(step) for step in span if isinstance(step, VirtualNodeResized)]
            events[start:] = [
                msgspec.structs.replace(
                    event,
                    request=request,
                    resized=growth,
                    event_id=first.event_id,
                    causation_id=first.causation_id,
                )
            ]
            return len(span)
    events.append(event)
    return 0


def _placement_span(events: list[AnyEvent], untaken: int, actor_id: str) -> int:
    """Where the events a placement of `actor_id` absorbs begin: the resizes just before it, and the actor's
    submission just before those (len(events) when there is nothing to absorb)."""
    start = len(events)
    while start > untaken and isinstance(events[start - 1], VirtualNodeResized):
        start -= 1
    before = events[start - 1] if start > untaken else None
    if isinstance(before, ActorSubmitted) and before.request.actor_id == actor_id:
        start -= 1
    return start


def _size(event: VirtualNodeResized) -> VirtualNodeSize:
    return VirtualNodeSize(event.vc_id, event.vnode_id, event.parent_node, event.resources)
