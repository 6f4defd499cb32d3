"""A view's snapshots saved off the folding path: Redis is optional, so a slow, read-only or lost Redis never holds
up folding or answers.

At most one save is in flight, as a background task bounded by the store's timeout; a snapshot due meanwhile is
skipped (the next point takes it). A failed save backs off (1 s, doubling to 60 s) before the next try, said once
in the log when saves start failing ("snapshots not saved: <reason>; retrying in 1s") and once when they succeed
again ("snapshots saved again").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from services.runtime.snapshots import SnapshotStore, SnapshotStoreError

log = logging.getLogger("corral.snapshots")

FIRST_BACKOFF_SECONDS = 1.0
"""How long after a failed save the next one waits; it doubles with each failure in a row."""
LONGEST_BACKOFF_SECONDS = 60.0
"""The longest wait between tries while saves fail."""


class SnapshotSaver:
    """Saves one view's snapshots in `store`; `saved(sequence, size, stored)` is called after a save Redis took
    (`stored` False: a later snapshot of the same view was there already)."""

    def __init__(self, store: SnapshotStore, view: str, saved: Callable[[int, int, bool], None]) -> None:
        self.store, self.view, self._saved = store, view, saved
        self.failing = ""
        """Why saves fail now ("" while they succeed)."""
        self.failing_since: float | None = None
        """When (time.monotonic) saves started failing."""
        self._backoff = 0.0
        self._retry_at = 0.0
        self._task: asyncio.Task[bool] | None = None

    def may_save(self) -> bool:
        """No save is in flight and none failed too recently."""
        return (self._task is None or self._task.done()) and time.monotonic() >= self._retry_at

    def save_soon(self, sequence: int, blob: bytes, log_id: str) -> None:
        """Start saving in the background (the caller checked `may_save`)."""
        self._task = asyncio.create_task(self._save(sequence, blob, log_id), name=f"{self.view}: snapshot save")

    async def save_now(self, sequence: int, blob: bytes, log_id: str) -> bool:
        """Save and wait for the outcome (at stop, once `finish_in_flight` has returned); whether Redis took it."""
        return await self._save(sequence, blob, log_id)

    async def finish_in_flight(self) -> None:
        """Wait for the save in flight, if any (bounded by the store's timeout)."""
        if self._task is not None:
            await asyncio.wait([self._task])

    async def close(self) -> None:
        """Cancel a save in flight."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _save(self, sequence: int, blob: bytes, log_id: str) -> bool:
        try:
            stored = await self.store.save(self.view, sequence, blob, log_id)
        except SnapshotStoreError as error:
            self._failed(str(error))
            return False
        if self.failing:
            log.warning("%s: snapshots saved again (after %s)", self.view, self.failing)
        self.failing, self.failing_since, self._backoff, self._retry_at = "", None, 0.0, 0.0
        self._saved(sequence, len(blob), stored)
        return True

    def _failed(self, reason: str) -> None:
        self._backoff = min(LONGEST_BACKOFF_SECONDS, self._backoff * 2 or FIRST_BACKOFF_SECONDS)
        self._retry_at = time.monotonic() + self._backoff
        if not self.failing:
            self.failing_since = time.monotonic()
            log.warning("%s: snapshots not saved: %s; retrying in %gs", self.view, reason, self._backoff)
        self.failing = reason
