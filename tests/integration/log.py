"""Read the whole event log of a mesh, as a test's independent witness."""

from __future__ import annotations

from schemas import AnyEvent
from schemas import subjects as s
from services.runtime.bus import Bus
from services.runtime.settings import Settings


async def read_events(nats_url: str, last: int = 0) -> list[AnyEvent]:
    """Every event in CORRAL_EVENTS, in order (up to sequence `last` when given)."""
    return [event for _sequence, event in await read_sequenced(nats_url, last)]


async def read_sequenced(nats_url: str, last: int = 0) -> list[tuple[int, AnyEvent]]:
    """Every readable event in CORRAL_EVENTS with the sequence of its message (the events of a batch share it), in
    order (up to sequence `last` when given)."""
    bus = await Bus.connect(Settings(nats_url=nats_url), "test-log-reader")
    try:
        held = bus.read_held(last=last or None)
        return [(entry.sequence, entry.event) async for entry in held if entry.event is not None]
    finally:
        await bus.close()


async def stored_about(bus: Bus, actor_id: str) -> bool:
    """Whether the log holds an event about the actor: on its own subject, or in a batch of actor events."""
    own = s.event_subject(s.ACTOR, actor_id)
    if await bus.last_sequence(subjects=(own,)):
        return True
    async for entry in bus.read_held((s.batch_subject(s.ACTOR),)):
        if entry.event is not None and s.subject_of(entry.event) == own:
            return True
    return False
