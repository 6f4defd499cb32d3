"""Keep a view folded from the log: load its snapshot, replay the tail, follow new events, snapshot as it goes."""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence

import anyio
import nats.errors
import nats.js.errors

from schemas import AnyEvent
from schemas.subjects import EVENTS_STREAM
from services.core.errors import UnfoldableEventError
from services.runtime import collector, metrics
from services.runtime.bus import Bus
from services.runtime.log_reader import LogEntry
from services.runtime.runner import EXIT_LOG_REPLACED, ServiceExit
from services.runtime.saver import SnapshotSaver
from services.runtime.snapshots import SnapshotStore, StoredSnapshot

log = logging.getLogger("corral.follower")

LOG_CHECK_SECONDS = 1.0
"""How often a running service checks that the event log is still the one its view folded."""
PATIENCE_SECONDS = 10.0
"""How long a wait for the view to fold the log may take before it is said in the log (`wait_patiently`), or raises
(`wait_for`)."""


class LogReplaced(ServiceExit):
    """The event log the view folded is gone or was made again: the service must start again from the new log."""

    def __init__(self, reason: str) -> None:
        super().__init__(EXIT_LOG_REPLACED, f"{reason}: restarting to rebuild the view from the new log")


class LogFollower:
    """Folds every event of the log (or of its `subjects`) once, in order, into a view through
    `fold(event, sequence, time_ns)` (`time_ns`: when the stream stored it, in Unix nanoseconds: the server's clock).

    `dump(sequence)` encodes the view; `load(blob, sequence)` replaces the view from a blob of the view at
    `sequence` (raising, the view untouched, on a corrupt or old-version blob or one of another sequence).
    `ready()` says whether the view may be snapshotted now (a scheduler with unconfirmed events of its own may not).
    """

    def __init__(
        self,
        bus: Bus,
        store: SnapshotStore,
        name: str,
        fold: Callable[[AnyEvent, int, int], None],
        dump: Callable[[int], bytes],
        load: Callable[[bytes, int], None],
        *,
        snapshot_every: int,
        ready: Callable[[], bool] = lambda: True,
        subjects: Sequence[str] = (),
    ) -> None:
        self.bus, self.store, self.name = bus, store, name
        self.subjects = tuple(subjects)
        """The event subjects the view folds (empty: all of them); the server sends no others."""
        self._fold_event, self._dump, self._load, self._ready = fold, dump, load, ready
        self.snapshot_every = snapshot_every
        self._offset = zlib.crc32(name.encode()) % snapshot_every
        self.sequence = 0
        self.skipped = 0
        """Events this process skipped (unreadable, or failed to fold), replays included."""
        self.folded = 0
        """Events this process folded, replays included."""
        self.lag = 0
        """Events the log reader had still to deliver after the last one folded."""
        self.snapshot_bytes = 0
        self.snapshot_at: float | None = None
        """When (time.monotonic) the view was last saved or loaded as a snapshot."""
        self.saver = SnapshotSaver(store, name, self._saved)
        self._partly: tuple[int, int] = (0, -1)
        """The (sequence, index) of the last event folded of a batch not yet folded whole: a batch read again (its
        reader stopped half-way) goes on after it."""
        self._dead_lettered_to = (0, 0)
        """The (sequence, index) of the newest event this service sent to dead letters."""
        self._snapshot_sequence = 0
        self._built = 0.0
        """Seconds the last snapshot took to encode."""
        self.log_id = ""
        """The identity of the log folded (see `Bus.log_identity`), recorded with every snapshot."""
        self.replaced = False
        """The log was found gone or replaced: this view must not be saved any more."""
        self._reader: AsyncIterator[LogEntry] | None = None
        self._delivered: tuple[str, int] | None = None
        self._advanced = asyncio.Condition()
        self._waiters = 0

    async def start(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Load the snapshot (refused when it does not fit this log and service, see `_restore`), then replay to
        the log's end; while JetStream does not answer (a server restarting, say), it waits."""
        began = time.perf_counter()
        self._dead_lettered_to = await self.bus.last_dead_event(self.name)
        self.log_id, log_end = await self.bus.with_retries(self.bus.log_identity, "the event log's identity")
        found = await self.store.load(self.name)
        if found is not None:
            self.sequence = self._snapshot_sequence = await self._restore(found, log_end)
            if self.sequence:
                self.snapshot_bytes, self.snapshot_at = len(found.blob), time.monotonic()
        replayed = await self._fold_to(await self.bus.with_retries(self.log_end, "the event log's end"), progress)
        seconds = time.perf_counter() - began
        rate = replayed / seconds if seconds > 0 else 0.0
        log.info(
            "%s: caught up at sequence %d (%d events replayed in %.2fs, %.0f/s)",
            self.name,
            self.sequence,
            replayed,
            seconds,
            rate,
        )

    async def _restore(self, found: StoredSnapshot, log_end: int) -> int:
        """Load a stored snapshot and return its sequence; 0 (the view untouched) when it is refused: written by
        another service or version, folded from another log, past the log's end, unreadable, or its blob is not
        the view at the sequence its record says. A refused snapshot is marked so that the next save replaces it."""
        reason = found.refusal(self.name, self.log_id, log_end)
        if reason is None:
            try:
                self._load(found.blob, int(found.sequence))
            except Exception as error:
                reason = f"{type(error).__name__}: {error}"
        if reason is not None:
            log.warning("%s: snapshot refused (%s): replaying the whole log", self.name, reason)
            await self.store.refuse(self.name, found, reason)
            return 0
        log.info("%s: snapshot at sequence %s loaded", self.name, found.sequence)
        return int(found.sequence)

    async def run(self) -> None:
        """Fold new events as they are appended, until the log subscription ends."""
        assert self._reader is not None, "start() first"
        while True:
            try:
                entry = await self._next()
            except StopAsyncIteration:
                return
            await self._fold(entry)
            if not entry.last:
                continue  # a batch is folded whole before anything else reads the view
            if self.snapshot_due() and self._ready() and self.saver.may_save() and not self.replaced:
                self.saver.save_soon(self.sequence, self._encode(self.sequence), self.log_id)

    def snapshot_due(self) -> bool:
        """The log has crossed one of this view's snapshot points since its last snapshot.

        The points are every `snapshot_every` events, shifted by an offset taken from the view's name, so the
        services of a mesh build their snapshots at different moments instead of all at once.
        """
        every, offset = self.snapshot_every, self._offset
        return (self.sequence + offset) // every > (self._snapshot_sequence + offset) // every

    async def log_end(self) -> int:
        """The sequence of the newest event in the log (on the follower's subjects)."""
        return await self.bus.last_sequence(subjects=self.subjects)

    async def caught_up(self, *, patient: bool = False) -> None:
        """Return once the view has folded the log up to its end as of now (what other writers appended too);
        raises `LogReplaced` when the log is no longer the one folded (a view of a lost log answers nothing).

        `TimeoutError` when JetStream or the log reader does not answer in time; `patient`: they are waited out
        however long (see `wait_patiently`)."""
        if patient:
            await self.wait_patiently(await self.bus.with_retries(self._end, "the event log's end"), "catching up")
        else:
            await self.wait_for(await self._end())

    async def _end(self) -> int:
        """The log's end (on the follower's subjects), once its identity is checked."""
        end = await self.check_log()
        return await self.log_end() if self.subjects else end

    async def check_log(self) -> int:
        """The log's last sequence, once its identity is checked: `LogReplaced` when it is gone or another one."""
        try:
            log_id, end = await self.bus.log_identity()
        except nats.js.errors.NotFoundError:
            log_id, end = "", 0
        if log_id == self.log_id or (log_id and not self.log_id):  # before start, any log is the one to fold
            return end
        self.replaced = True
        if not log_id:
            raise LogReplaced(f"the event log {EVENTS_STREAM} is gone (deleted, or the JetStream store lost)")
        raise LogReplaced(
            f"the event log was replaced (created {log_id}; this view folded the one created {self.log_id})"
        )

    async def watch_log(self, every: float = LOG_CHECK_SECONDS) -> None:
        """Check every `every` seconds that the log is still the one folded; raises `LogReplaced` (said in one log
        line) when it is not. While NATS does not answer, nothing is decided."""
        while True:
            await anyio.sleep(every)
            try:
                await self.check_log()
            except LogReplaced as replaced:
                log.error("%s: %s", self.name, replaced)
                raise
            except (TimeoutError, nats.errors.Error):
                continue

    def _read_from_next(self) -> AsyncIterator[LogEntry]:
        self._delivered = None
        return self.bus.read_log(
            self.sequence + 1, subjects=self.subjects, max_bytes=self.bus.settings.max_message_bytes
        )

    async def _next(self) -> LogEntry:
        """The next entry of the log; a message not delivered reads the log again from the last event folded.

        A consumer numbers what it delivers, so a gap in the numbers means the client dropped messages it could
        not keep up with (a slow consumer), and a new consumer means the client replaced it (after a reconnect)
        from a position of its own: folding on would build a wrong view.
        """
        assert self._reader is not None
        entry = await anext(self._reader)
        while self._missed_before(entry):
            log.warning(
                "%s: events after %d were not delivered (slow consumer or reconnect?): reading the log again",
                self.name,
                self.sequence,
            )
            await self.close()
            self._reader = self._read_from_next()
            entry = await anext(self._reader)
        self._delivered = (entry.consumer, entry.delivered)
        return entry

    def _missed_before(self, entry: LogEntry) -> bool:
        if entry.index:
            return False  # the entries of one message share its delivery
        if self._delivered is None:
            return entry.delivered != 1
        consumer, delivered = self._delivered
        return entry.consumer != consumer or entry.delivered != delivered + 1

    async def fold_to_end(self, timeout: float) -> None:
        """Fold what the log holds now, reading it afresh (the reader may have stopped with its task); gives up
        after `timeout` seconds. For a last snapshot at stop that reflects the service's own latest events."""
        with anyio.move_on_after(timeout):
            target = await self.log_end()
            if self.sequence < target:
                await self._fold_to(target)

    async def _fold_to(self, target: int, progress: Callable[[int, int], None] | None = None) -> int:
        """Read the log afresh from the next event and fold up to `target`; how many events were folded."""
        await self.close()
        self._reader = self._read_from_next()
        folded = 0
        while self.sequence < target:
            folded += await self._fold(await self._next())
            if progress is not None and folded % 10_000 == 0:
                progress(self.sequence, target)
        return folded

    async def close(self) -> None:
        """Stop reading the log (before the bus closes, so the subscription ends cleanly)."""
        await self.saver.close()
        reader, self._reader = self._reader, None
        if isinstance(reader, AsyncGenerator):
            await reader.aclose()

    async def _fold(self, entry: LogEntry) -> int:
        if entry.sequence <= self.sequence or (entry.sequence, entry.index) <= self._partly:
            return 0  # delivered again after a reconnect: already folded
        if entry.event is None:
            await self._skip(entry, entry.error)
        else:
            try:
                self._fold_event(entry.event, entry.sequence, entry.time_ns)
            except UnfoldableEventError as error:  # refused whole before the fold changed anything
                await self._skip(entry, f"could not be folded: {error}")
            except Exception as error:
                await self._skip(entry, f"could not be folded ({type(error).__name__}: {error})", error)
            else:
                self.folded += 1
        if not entry.last:
            self._partly = (entry.sequence, entry.index)
            return 1  # the sequence is the message's: it counts as folded once all of it is
        self.sequence, self.lag = entry.sequence, entry.pending
        if self._waiters:  # no lock and no wake-up per event while nobody waits (the common case)
            async with self._advanced:
                self._advanced.notify_all()
        return 1

    async def _skip(self, entry: LogEntry, reason: str, error: Exception | None = None) -> None:
        """Count an event the view does not fold, and send it to dead letters unless an earlier run did.

        Whether an event is skipped depends on its bytes and the view alone, so every process of the service,
        and every replay, skips the same events and builds the same view.
        """
        self.skipped += 1
        where = f"{entry.sequence}" + (f" (index {entry.index} of its batch)" if entry.index or not entry.last else "")
        if (entry.sequence, entry.index) <= self._dead_lettered_to:
            log.info("%s: event %s skipped again (in dead letters already): %s", self.name, where, reason)
            return
        log.error(
            "%s: event %s on %s skipped, sent to dead letters: %s",
            self.name,
            where,
            entry.subject,
            reason,
            exc_info=error,
        )
        await self.bus.dead_letter(self.name, entry.raw, reason, entry.subject, entry.sequence, index=entry.index)
        self._dead_lettered_to = (entry.sequence, entry.index)

    async def wait_for(self, sequence: int, timeout: float | None = PATIENCE_SECONDS) -> None:
        """Return once the view has folded the log up to `sequence` (read-your-writes for a command); `TimeoutError`
        after `timeout` seconds (None: never)."""
        if self.sequence >= sequence:
            return
        self._waiters += 1
        try:
            async with self._advanced:
                await asyncio.wait_for(self._advanced.wait_for(lambda: self.sequence >= sequence), timeout)
        finally:
            self._waiters -= 1

    async def wait_patiently(self, sequence: int, why: str) -> None:
        """Return once the view has folded the log up to `sequence`, however long the log stalls (JetStream not
        answering, say). For a leader, which may neither decide on a view short of its own writes nor drop what it
        holds by exiting; a wait longer than `PATIENCE_SECONDS` is logged once, and its end."""
        try:
            await self.wait_for(sequence, PATIENCE_SECONDS)
        except TimeoutError:
            log.warning(
                "%s: %s: the log has not reached sequence %d in %gs; waiting on, deciding nothing",
                self.name,
                why,
                sequence,
                PATIENCE_SECONDS,
            )
            await self.wait_for(sequence, None)
            log.info("%s: %s: the log reached sequence %d", self.name, why, sequence)

    async def snapshot(self) -> bool:
        """Save the view as of the current sequence and wait for the outcome (at stop; a save in flight finishes
        first): whether Redis took it (it keeps a newer one). Never once the log it was folded from is gone."""
        if self.replaced:
            return False
        await self.saver.finish_in_flight()  # before encoding: the save in flight logs its own build time
        return await self.saver.save_now(self.sequence, self._encode(self.sequence), self.log_id)

    def _encode(self, sequence: int) -> bytes:
        """The view's snapshot blob (encoded in the loop: the view must not change meanwhile)."""
        began = time.perf_counter()
        with collector.paused():
            blob = self._dump(sequence)
        self._built = time.perf_counter() - began
        metrics.SNAPSHOT_BUILD_SECONDS.record(self._built)
        return blob

    def _saved(self, sequence: int, size: int, stored: bool) -> None:
        """A save Redis took: the snapshot point moves on (a later snapshot stored by another process covers it)."""
        self._snapshot_sequence = max(self._snapshot_sequence, sequence)
        if not stored:
            log.info("%s: snapshot at sequence %d skipped: a later one is stored", self.name, sequence)
            return
        self.snapshot_bytes, self.snapshot_at = size, time.monotonic()
        log.info(
            "%s: snapshot saved at sequence %d (%.1f MB, built in %.0f ms)",
            self.name,
            sequence,
            size / 1e6,
            self._built * 1000,
        )
