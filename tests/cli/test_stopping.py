"""A command told to stop (Ctrl-C) ends even when a task's clean-up waits on something that never comes."""

from __future__ import annotations

import asyncio
import time

import pytest

from services.cli import common


async def _clean_up_that_hangs(started: asyncio.Event) -> None:
    try:
        started.set()
        await asyncio.Event().wait()
    finally:
        await asyncio.Event().wait()  # a clean-up that waits on the bus forever, say


def test_stop_tasks_gives_up_on_a_task_whose_clean_up_hangs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "STOP_GRACE_S", 0.2)

    async def scenario() -> tuple[float, bool]:
        started = asyncio.Event()
        stuck = asyncio.create_task(_clean_up_that_hangs(started))
        await started.wait()
        began = time.monotonic()
        await asyncio.wait_for(common.stop_tasks(stuck), 5.0)  # a stop_tasks that waited for it would fail here
        waited, still_running = time.monotonic() - began, not stuck.done()
        stuck.cancel()  # a second cancellation ends its clean-up, as asyncio.run's own does at exit
        await asyncio.gather(stuck, return_exceptions=True)
        return waited, still_running

    waited, still_running = asyncio.run(scenario())
    assert still_running
    assert 0.2 <= waited < 2.0


def test_stop_tasks_returns_once_every_task_has_ended() -> None:
    async def scenario() -> tuple[float, list[bool]]:
        tasks = [asyncio.create_task(asyncio.sleep(60)) for _ in range(3)]
        await asyncio.sleep(0)
        began = time.monotonic()
        await common.stop_tasks(*tasks)
        return time.monotonic() - began, [task.cancelled() for task in tasks]

    waited, cancelled = asyncio.run(scenario())
    assert cancelled == [True, True, True]
    assert waited < common.STOP_GRACE_S
