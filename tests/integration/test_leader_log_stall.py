"""A leading scheduler whose log reader stalls longer than its waits' 10 s neither exits nor answers on a view it
has not confirmed: it waits, then serves.

Its waits for the view to fold its own election, and to fold the log up to a batch it appended (to confirm it is
still elected), raised `TimeoutError` past 10 s: the process exited 1. The scheduler runs in the test's process
against real servers; its fold of new events is held back (the stall) while the test watches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from schemas import Decision, NodeRegistered, SchedulerElected, ScheduleRequest
from services.client import Client
from services.local.mesh import Mesh
from services.runtime.follower import PATIENCE_SECONDS, LogFollower
from services.runtime.log_reader import LogEntry
from services.scheduler.app import main as scheduler_main
from tests.integration.conftest import bus_of, cancelled, holds_within, scheduler_answers, settings_of
from tests.integration.log import read_events

pytestmark = pytest.mark.anyio

STALL_S = PATIENCE_SECONDS + 1
"""Longer than the leader's waits gave the log before."""


class Stall:
    """Holds the scheduler's fold of every event after sequence `after` until `release`."""

    def __init__(self) -> None:
        self.after: int | None = None
        self.held = asyncio.Event()
        """Set once an event is held back."""
        self.released = asyncio.Event()

    def hold(self, after: int) -> None:
        self.after = after

    def release(self) -> None:
        self.released.set()


@pytest.fixture
def stall(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stall]:
    stalled = Stall()
    fold = LogFollower._fold

    async def held_back(follower: LogFollower, entry: LogEntry) -> int:
        if follower.name == "scheduler" and stalled.after is not None and entry.sequence > stalled.after:
            stalled.held.set()
            await stalled.released.wait()
        return await fold(follower, entry)

    monkeypatch.setattr(LogFollower, "_fold", held_back)
    try:
        yield stalled
    finally:
        stalled.release()


async def test_a_scheduler_whose_election_is_not_folded_for_long_waits_deciding_nothing_then_leads(
    servers: Mesh, stall: Stall
) -> None:
    stall.hold(after=0)  # the log is empty: the election will be its first event
    scheduler = asyncio.ensure_future(scheduler_main(settings_of(servers)))
    try:
        async with Client(servers.nats_url, timeout=STALL_S + 10) as client:
            await asyncio.wait_for(stall.held.wait(), timeout=10.0)
            asked = asyncio.ensure_future(client.submit(ScheduleRequest("job", {"CPU": 1}), timeout=STALL_S + 10))
            await asyncio.sleep(STALL_S)
            assert not scheduler.done()
            assert not asked.done()
            # its election alone (again, if its lease lapsed on a busy machine): nothing decided on the unconfirmed view
            assert {type(event) for event in await read_events(servers.nats_url)} == {SchedulerElected}
            stall.release()
            assert isinstance(await asked, Decision)
            assert not scheduler.done()
    finally:
        await cancelled(scheduler)


async def test_a_leader_that_cannot_confirm_it_is_still_elected_for_long_answers_nothing_then_serves(
    servers: Mesh, stall: Stall
) -> None:
    scheduler = asyncio.ensure_future(scheduler_main(settings_of(servers)))
    try:
        async with bus_of(servers, "watcher") as bus, Client(servers.nats_url, timeout=STALL_S + 10) as client:
            assert await holds_within(lambda: scheduler_answers(client), timeout=10.0)
            assert isinstance(await client.submit(ScheduleRequest("first", {"CPU": 1}), timeout=10.0), Decision)
            stall.hold(after=await bus.last_sequence())
            await bus.append([NodeRegistered(node_id="n1", resources={"CPU": 1.0}, labels={}, event_id="n1")])
            asked = asyncio.ensure_future(client.submit(ScheduleRequest("job", {"CPU": 1}), timeout=STALL_S + 10))
            await asyncio.wait_for(stall.held.wait(), timeout=10.0)
            await asyncio.sleep(STALL_S)
            assert not scheduler.done()
            assert not asked.done()  # decided and appended after n1's registration, but not confirmed: unanswered
            stall.release()
            assert isinstance(await asked, Decision)
            assert not scheduler.done()
    finally:
        await cancelled(scheduler)
