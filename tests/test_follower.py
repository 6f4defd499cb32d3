"""The log follower folds every event exactly once, in order, even when the client drops messages (a fake bus)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from schemas import AnyEvent, NodeDied
from services.runtime.bus import LogEntry
from services.runtime.follower import LogFollower


class HoleyBus:
    """A log of 6 events whose first read drops events 3 and 4, as a slow consumer would."""

    def __init__(self) -> None:
        self.settings = type("S", (), {"max_message_bytes": 1 << 20})()
        self.reads: list[int] = []

    async def last_sequence(self) -> int:
        return 6

    def read_log(self, start: int, max_bytes: int = 0) -> AsyncIterator[LogEntry]:
        self.reads.append(start)
        dropped = {3, 4} if len(self.reads) == 1 else set()

        async def entries() -> AsyncIterator[LogEntry]:
            for sequence in range(start, 7):
                if sequence not in dropped:
                    yield LogEntry(sequence, NodeDied(node_id=f"n{sequence}"), b"")

        return entries()


class NoSnapshots:
    async def load(self, _name: str) -> None:
        return None


@pytest.mark.anyio
async def test_a_hole_in_the_delivered_sequence_is_read_again_and_nothing_is_folded_twice() -> None:
    folded: list[tuple[int, str]] = []

    def apply(event: AnyEvent, sequence: int) -> None:
        assert isinstance(event, NodeDied)
        folded.append((sequence, event.node_id))

    bus: Any = HoleyBus()
    store: Any = NoSnapshots()
    follower = LogFollower(bus, store, "test", apply, lambda _s: b"", lambda _b: 0, snapshot_every=1000)
    await follower.start()
    assert folded == [(n, f"n{n}") for n in range(1, 7)]
    assert bus.reads == [1, 3]
    await follower.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
