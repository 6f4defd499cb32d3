"""How the core keeps its events for the log: fewer, fuller events for the commonest decisions (pure).

- An actor placed as it is submitted is one `ActorPlaced` carrying its request.
- The growth of flexible virtual nodes that makes room for a placement rides on that `ActorPlaced`
  (`resized`, applied before it), and the shrink a removal allows rides on that `ActorRemoved` (applied after it).

Only the events of the command under way are merged (none has been handed over for the log yet), and the merged
event keeps the order in which everything is applied, the id of the first event it replaces (ids stay contiguous:
the caller gives back one id per event absorbed) and that event's cause.
"""

from __future__ import annotations

from typing import Final, Generic, TypeVar

import msgspec

from schemas import ActorPlaced, ActorRemoved, ActorSubmitted, AnyEvent, VirtualNodeResized, VirtualNodeSize
from services.core.type_tests import TypeTest

T = TypeVar("T")
_RESIZED: Final[TypeTest[VirtualNodeResized]] = TypeTest(VirtualNodeResized)
_REMOVED: Final[TypeTest[ActorRemoved]] = TypeTest(ActorRemoved)
_PLACED: Final[TypeTest[ActorPlaced]] = TypeTest(ActorPlaced)
_SUBMITTED: Final[TypeTest[ActorSubmitted]] = TypeTest(ActorSubmitted)
"""What merging asks of every event written (see `type_tests`)."""


class Outcome(Generic[T]):
    """What one command decided, with the events it wrote, in order (as Nomad's scheduler returns its plan)."""

    __slots__ = ("events", "result")

    def __init__(self, result: T, events: list[AnyEvent]) -> None:
        self.result, self.events = result, events


class CommandFailedError(Exception):
    """A command raised (a bug, not a refusal) after writing `events`: the view folded them, so the log needs them
    too. The error the command raised is the `__cause__`."""

    def __init__(self, events: list[AnyEvent], cause: Exception) -> None:
        super().__init__(f"a command failed after writing {len(events)} events")
        self.events = events
        self.__cause__ = cause  # set here too: compiled, `raise ... from` leaves it unset


class Journal:
    """The events of the command under way (merged as they are written) and, when kept, everything before them."""

    __slots__ = ("history", "keep_history", "untaken", "written")

    def __init__(self, history: list[AnyEvent] | None = None, *, keep_history: bool = True) -> None:
        self.keep_history = keep_history
        """Whether closed commands' events and folded events stay (for `events`)."""
        self.history: list[AnyEvent] = list(history or [])
        self.written: list[AnyEvent] = []
        """The events written since the last `close`."""
        self.untaken = 0
        """Where the command under way began in `written` (an event merges only with its own command's)."""

    def begin(self) -> None:
        """A new command begins: what it writes merges with nothing written before (an in-process caller may run
        several commands between two `close` calls)."""
        self.untaken = len(self.written)

    def write(self, event: AnyEvent) -> int:
        """Keep an event the cluster wrote, merged with what its command wrote before; how many it absorbed."""
        return append_merged(self.written, self.untaken, event)

    def folded(self, event: AnyEvent) -> None:
        """Note an event another writer appended (already in the log: kept only as history)."""
        if self.keep_history:
            self.history.append(event)

    def close(self) -> list[AnyEvent]:
        """The events written since the last call, in order; they become history when it is kept."""
        written, self.written, self.untaken = self.written, [], 0
        if self.keep_history:
            self.history += written
        return written

    def events(self) -> list[AnyEvent]:
        """The history kept, then what was written since the last `close`."""
        return [*self.history, *self.written]


def append_merged(events: list[AnyEvent], untaken: int, event: AnyEvent) -> int:
    """Keep `event` at the end of `events` (whose entries from `untaken` on are not in the log yet), merged with
    what it can carry; how many events it absorbed."""
    if _RESIZED.holds(event):
        last = events[-1] if len(events) > untaken else None
        if _REMOVED.holds(last):
            events[-1] = msgspec.structs.replace(last, resized=[*last.resized, _size(event)])
            return 1
    elif _PLACED.holds(event):
        start = _placement_span(events, untaken, event.actor_id)
        if start < len(events):
            span = events[start:]
            first = span[0]
            request = first.request if _SUBMITTED.holds(first) else event.request
            growth = [_size(step) for step in span if _RESIZED.holds(step)]
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
    while start > untaken and _RESIZED.holds(events[start - 1]):
        start -= 1
    before = events[start - 1] if start > untaken else None
    if _SUBMITTED.holds(before) and before.request.actor_id == actor_id:
        start -= 1
    return start


def _size(event: VirtualNodeResized) -> VirtualNodeSize:
    return VirtualNodeSize(event.vc_id, event.vnode_id, event.parent_node, event.resources)
