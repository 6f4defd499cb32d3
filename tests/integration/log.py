"""Read the whole event log of a mesh, as a test's independent witness."""

from __future__ import annotations

from schemas import AnyEvent
from services.runtime.bus import Bus
from services.runtime.settings import Settings


async def read_events(nats_url: str, last: int = 0) -> list[AnyEvent]:
    """Every event in CORRAL_EVENTS, in order (up to sequence `last` when given)."""
    bus = await Bus.connect(Settings(nats_url=nats_url), "test-log-reader")
    try:
        return await bus.read_to(last or await bus.last_sequence())
    finally:
        await bus.close()
