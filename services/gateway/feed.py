"""The gateway's one reader of the live event log, shared by every event stream: each new entry rendered once as a
Server-Sent Event and kept in a bounded window that each stream reads at its own pace."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

from litestar.response import ServerSentEventMessage

from services.client import Client
from services.runtime.log_reader import LogEntry

log = logging.getLogger("corral.gateway")

UNREADABLE = "unreadable"
"""The SSE event name of a log entry no reader can decode (its data says why)."""
WINDOW_EVENTS = 1024
"""How many of the newest entries the feed keeps: a stream further behind the log than this is dropped (its client
resumes with `Last-Event-ID`)."""
BATCH_EVENTS = 256
"""The most entries a stream takes from the window in one write."""
RETRY_AFTER_FAILURE_S = 1.0
"""How long the feed waits before it reads the log again after its reader failed."""


def rendered(entry: LogEntry) -> bytes:
    """A log entry as one Server-Sent Event: `id` its sequence (the events of one batch share their message's),
    `event` its type, `data` its JSON (or, for one no reader can decode, `event: unreadable` and why)."""
    if entry.event is None:
        message = ServerSentEventMessage(json.dumps({"error": entry.error}), event=UNREADABLE, id=entry.sequence)
    else:
        message = ServerSentEventMessage(entry.raw.decode(), event=type(entry.event).__name__, id=entry.sequence)
    return message.encode()


@dataclass(eq=False, slots=True)
class Reader:
    """A stream reading the window: the next sequence it wants, and what to set when it falls out of the window."""

    position: int
    dropped: asyncio.Event


def drop(reader: Reader, window: int) -> None:
    """Drop a stream that fell out of the window (said once in the gateway's log)."""
    if not reader.dropped.is_set():
        log.info(
            "an event stream fell more than %d events behind the log: dropped after sequence %d (it resumes with "
            "Last-Event-ID)",
            window,
            reader.position - 1,
        )
        reader.dropped.set()


class Feed:
    """The log followed once, from its end when the first stream asks, for every stream of the gateway."""

    def __init__(self, client: Client, window: int = WINDOW_EVENTS) -> None:
        self._client = client
        self._window = window
        self._sequences: list[int] = []
        self._messages: list[bytes] = []
        self._readers: set[Reader] = set()
        self._arrived = asyncio.Event()
        self._started = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.next = 0
        """The sequence the feed reads next (0 until it starts)."""
        self.covered_from = 0
        """Every entry from this sequence up to `next` is in the window."""

    async def start(self) -> None:
        """Follow the log (once, however many streams ask), and wait until the feed knows where it starts."""
        if self._task is None:
            self._task = asyncio.create_task(self._follow(), name="the gateway's feed of the log")
        await self._started.wait()

    async def close(self) -> None:
        """Stop following the log."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _follow(self) -> None:
        while True:
            try:
                if not self.next:
                    self.next = self.covered_from = await self._client.bus.last_sequence() + 1
                    self._started.set()
                async for entry in self._client.bus.read_log(self.next):
                    if entry.sequence >= self.next:
                        self._add(entry, rendered(entry))
            except Exception:
                log.exception("the gateway's feed of the event log failed; reading it again")
            await asyncio.sleep(RETRY_AFTER_FAILURE_S)

    def _add(self, entry: LogEntry, message: bytes) -> None:
        self._sequences.append(entry.sequence)
        self._messages.append(message)
        if entry.last:  # a batch's sequence is read past once all of it is in the window
            self.next = entry.sequence + 1
        if len(self._sequences) >= 2 * self._window:
            cut = bisect_left(self._sequences, self._sequences[self._window])  # never within a batch
            del self._sequences[:cut], self._messages[:cut]
            self.covered_from = self._sequences[0]
            for reader in self._readers:
                if reader.position < self.covered_from:
                    drop(reader, self._window)
        self._arrived.set()
        self._arrived = asyncio.Event()

    @contextlib.contextmanager
    def reading(self, position: int, dropped: asyncio.Event) -> Iterator[Reader]:
        """A stream reading the window from `position` on; `dropped` is set if it falls out of the window."""
        reader = Reader(position, dropped)
        self._readers.add(reader)
        try:
            yield reader
        finally:
            self._readers.discard(reader)

    def take(self, reader: Reader) -> bytes | None:
        """The reader's next entries in the window (at most `BATCH_EVENTS`, b"" when none yet), its position moved
        past them; None when it fell out of the window."""
        if reader.position < self.covered_from:
            drop(reader, self._window)
            return None
        first = bisect_left(self._sequences, reader.position)
        end = min(first + BATCH_EVENTS, len(self._sequences))
        if end > first:
            end = bisect_right(self._sequences, self._sequences[end - 1])  # a batch's events go together
            reader.position = self._sequences[end - 1] + 1
        return b"".join(self._messages[first:end])

    async def arrival(self, timeout: float) -> bool:
        """Wait for the next entry, up to `timeout` seconds; whether one came."""
        try:
            await asyncio.wait_for(self._arrived.wait(), timeout)
        except TimeoutError:
            return False
        return True
