"""A log reader with a backlog gives the event loop a turn every `ENTRIES_PER_TURN` entries: a service folding
thousands of waiting events (after a stall, or a burst another service appended) goes on renewing its lease and
answering meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator

import pytest

from schemas import NodeRegistered
from services.local.mesh import Mesh
from services.runtime.bus import Bus
from services.runtime.log_reader import ENTRIES_PER_TURN
from tests.integration.conftest import bus_of, holds_within

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

BACKLOG = 20 * ENTRIES_PER_TURN


@pytest.fixture
async def bus(servers: Mesh) -> AsyncIterator[Bus]:
    """A bus to the servers' NATS, its log holding `BACKLOG` + 1 events."""
    async with bus_of(servers, "reader") as connected:
        await connected.ensure_streams()
        events = [NodeRegistered(f"n{i}", {"CPU": 1.0}, {}, event_id=f"e{i}") for i in range(BACKLOG + 1)]
        for start in range(0, len(events), 1_000):
            await connected.append(events[start : start + 1_000])
        yield connected


async def test_a_reader_draining_a_backlog_lets_other_tasks_run_between_entries(bus: Bus) -> None:
    """The whole backlog waits in the reader's queue (no entry is awaited from the network, which would give the loop
    its turns anyway); the reader still lets other tasks run every `ENTRIES_PER_TURN` entries."""
    received = bus.nc.stats["in_msgs"]
    reader = bus.read_log(1)
    assert isinstance(reader, AsyncGenerator)
    first = await anext(reader)

    async def backlog_received() -> bool:
        return bus.nc.stats["in_msgs"] - received >= BACKLOG + 1

    assert await holds_within(backlog_received, timeout=30), "the backlog never reached the reader's queue"
    turns = 0

    async def count_turns() -> None:
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    counter = asyncio.create_task(count_turns())
    await asyncio.sleep(0)
    turns = 0
    sequences = [first.sequence] + [(await anext(reader)).sequence for _ in range(BACKLOG)]
    seen = turns
    counter.cancel()
    await reader.aclose()
    assert sequences == list(range(1, BACKLOG + 2))
    assert seen >= BACKLOG // ENTRIES_PER_TURN - 1, f"{seen} turns for {BACKLOG:,} entries"
