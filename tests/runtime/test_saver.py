"""Snapshot saves off the folding path: one in flight, a failure backs off 1 s doubling to 60 s, said once per
change (a fake store and clock; Redis outages against real servers: tests/integration/test_redis_outages.py)."""

from __future__ import annotations

import asyncio
import itertools
import logging
from types import SimpleNamespace
from typing import Any

import pytest

from services.runtime import saver as saver_module
from services.runtime.saver import SnapshotSaver
from services.runtime.snapshots import SnapshotStoreError

pytestmark = pytest.mark.anyio


class FlakyStore:
    """Fails while `down` says why; `gate` holds each save until set."""

    def __init__(self) -> None:
        self.down = ""
        self.gate = asyncio.Event()
        self.gate.set()
        self.saves: list[int] = []

    async def save(self, _view: str, sequence: int, _blob: bytes, _log_id: str) -> bool:
        await self.gate.wait()
        if self.down:
            raise SnapshotStoreError(self.down)
        self.saves.append(sequence)
        return True


async def test_a_failing_store_backs_off_doubling_to_a_minute_and_is_said_once_each_way(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    now = [100.0]
    monkeypatch.setattr(saver_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    store = FlakyStore()
    saved: list[tuple[int, int, bool]] = []
    store_any: Any = store
    saver = SnapshotSaver(store_any, "view", lambda *outcome: saved.append(outcome))
    store.down = "READONLY You can't write against a read only replica."
    tries = [now[0]]
    with caplog.at_level(logging.INFO, logger="corral.snapshots"):
        for sequence in range(1, 10):
            saver.save_soon(sequence, b"blob", "log")
            await saver.finish_in_flight()
            while not saver.may_save():  # the clock moves on a second at a time until the next try is allowed
                now[0] += 1.0
            tries.append(now[0])
        waits = [later - earlier for earlier, later in itertools.pairwise(tries)]
        assert waits == [1, 2, 4, 8, 16, 32, 60, 60, 60]
        assert saver.failing.startswith("READONLY")
        store.down = ""
        await saver.save_now(10, b"blob", "log")
    assert saved == [(10, 4, True)] and not saver.failing and saver.may_save()
    said = [record.getMessage() for record in caplog.records]
    assert said == [
        "view: snapshots not saved: READONLY You can't write against a read only replica.; retrying in 1s",
        "view: snapshots saved again (after READONLY You can't write against a read only replica.)",
    ]


async def test_a_snapshot_due_while_one_is_in_flight_waits_for_it() -> None:
    store = FlakyStore()
    store.gate.clear()
    store_any: Any = store
    saver = SnapshotSaver(store_any, "view", lambda *_outcome: None)
    saver.save_soon(1, b"blob", "log")
    await asyncio.sleep(0)
    assert not saver.may_save()
    store.gate.set()
    await saver.finish_in_flight()
    assert saver.may_save() and store.saves == [1]
