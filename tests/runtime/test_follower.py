"""The log follower folds every event exactly once, in order, even when the client drops messages (a fake bus)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import pytest

from schemas import AnyEvent, NodeDied
from services.runtime import follower as follower_module
from services.runtime.follower import LogFollower
from services.runtime.log_reader import LogEntry

T = TypeVar("T")


class FakeLog:
    """A log of 6 events read through numbered consumers; `deliver` says what each read's consumer sends.

    `deliver(read, sequences)` returns (stream sequence, consumer name, consumer sequence) triples: by default
    every event in order, numbered 1, 2, 3... by one consumer per read.
    """

    def __init__(self, on_subjects: set[int] | None = None) -> None:
        self.settings = type("S", (), {"max_message_bytes": 1 << 20})()
        self.reads: list[int] = []
        self.dead_letters: list[tuple[str, str, int]] = []
        self.on_subjects = on_subjects or set(range(1, 7))
        """The sequences whose events are on the follower's subjects."""

    async def last_sequence(self, subjects: Sequence[str] = ()) -> int:
        return max(self.on_subjects)

    async def last_dead_event(self, _service: str) -> tuple[int, int]:
        return max(((sequence, 0) for _, _, sequence in self.dead_letters), default=(0, 0))

    async def dead_letter(
        self, service: str, _data: bytes, reason: str, _subject: str, sequence: int, *, index: int = 0
    ) -> None:
        self.dead_letters.append((service, reason, sequence))

    async def log_identity(self) -> tuple[str, int]:
        return "fake", 6

    async def with_retries(self, ask: Callable[[], Awaitable[T]], _what: str) -> T:
        return await ask()

    def deliver(self, read: int, sequences: list[int]) -> list[tuple[int, str, int]]:
        return [(sequence, f"c{read}", number) for number, sequence in enumerate(sequences, 1)]

    def read_log(self, start: int, subjects: Sequence[str] = (), max_bytes: int = 0) -> AsyncIterator[LogEntry]:
        self.reads.append(start)
        sequences = [n for n in range(start, 7) if n in self.on_subjects]
        delivered = self.deliver(len(self.reads), sequences)

        async def entries() -> AsyncIterator[LogEntry]:
            for sequence, consumer, number in delivered:
                yield LogEntry(sequence, NodeDied(node_id=f"n{sequence}"), b"", consumer=consumer, delivered=number)

        return entries()


class HoleyLog(FakeLog):
    """The first read drops events 3 and 4, as a slow consumer would: the numbers jump from 2 to 5."""

    def deliver(self, read: int, sequences: list[int]) -> list[tuple[int, str, int]]:
        sent = super().deliver(read, sequences)
        return [item for item in sent if read > 1 or item[0] not in {3, 4}]


class ReplacedConsumerLog(FakeLog):
    """The first read's consumer is replaced after event 2 by one that starts at 5 (numbered from 1 again)."""

    def deliver(self, read: int, sequences: list[int]) -> list[tuple[int, str, int]]:
        if read > 1:
            return super().deliver(read, sequences)
        return [(1, "c1", 1), (2, "c1", 2), (5, "c1b", 1), (6, "c1b", 2)]


class StalledLog(FakeLog):
    """Ends at event 3 until `end` is moved on; delivers nothing after 3 until `go_on` is set (a stalled reader)."""

    def __init__(self) -> None:
        super().__init__()
        self.end = 3
        self.go_on = asyncio.Event()

    async def last_sequence(self, subjects: Sequence[str] = ()) -> int:
        return self.end

    async def log_identity(self) -> tuple[str, int]:
        return "fake", self.end

    def read_log(self, start: int, subjects: Sequence[str] = (), max_bytes: int = 0) -> AsyncIterator[LogEntry]:
        entries = super().read_log(start, subjects, max_bytes)

        async def stalling() -> AsyncIterator[LogEntry]:
            async for entry in entries:
                if entry.sequence > 3:
                    await self.go_on.wait()
                yield entry

        return stalling()


class NoSnapshots:
    async def load(self, _name: str) -> None:
        return None


async def follow(bus: Any, unfoldable: frozenset[int] = frozenset()) -> list[int]:
    """Start a follower on `bus`; the sequences it folded (those in `unfoldable` raise half-way through)."""
    folded: list[int] = []

    def fold(event: AnyEvent, sequence: int, _time_ns: int) -> None:
        assert isinstance(event, NodeDied) and event.node_id == f"n{sequence}"
        if sequence in unfoldable:
            raise KeyError(event.node_id)
        folded.append(sequence)

    store: Any = NoSnapshots()
    follower = LogFollower(bus, store, "test", fold, lambda _s: b"", lambda _b, _s: None, snapshot_every=1000)
    await follower.start()
    await follower.close()
    assert follower.skipped == len(unfoldable)
    return folded


@pytest.mark.anyio
async def test_a_hole_in_the_delivered_numbers_is_read_again_and_nothing_is_folded_twice() -> None:
    bus = HoleyLog()
    assert await follow(bus) == [1, 2, 3, 4, 5, 6]
    assert bus.reads == [1, 3]


@pytest.mark.anyio
async def test_a_consumer_replaced_under_the_follower_is_read_again_from_the_last_event_folded() -> None:
    bus = ReplacedConsumerLog()
    assert await follow(bus) == [1, 2, 3, 4, 5, 6]
    assert bus.reads == [1, 3]


@pytest.mark.anyio
async def test_a_follower_of_some_subjects_folds_their_events_without_reading_again() -> None:
    bus = FakeLog(on_subjects={2, 5, 6})
    assert await follow(bus) == [2, 5, 6]
    assert bus.reads == [1]


@pytest.mark.anyio
async def test_an_unfoldable_event_is_skipped_counted_and_dead_lettered_once_across_replays() -> None:
    bus = FakeLog()
    assert await follow(bus, frozenset({3})) == [1, 2, 4, 5, 6]
    assert await follow(bus, frozenset({3})) == [1, 2, 4, 5, 6]  # a replay skips it again, the same way
    assert bus.dead_letters == [("test", "could not be folded (KeyError: 'n3')", 3)]


@pytest.mark.anyio
async def test_a_patient_catch_up_outlasts_a_stalled_log_says_so_once_and_ends_when_the_log_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(follower_module, "PATIENCE_SECONDS", 0.01)
    caplog.set_level(logging.INFO, "corral.follower")
    bus: Any = StalledLog()
    store: Any = NoSnapshots()
    fold, dump, load = (lambda *_: None), (lambda _s: b""), (lambda _b, _s: None)
    follower = LogFollower(bus, store, "test", fold, dump, load, snapshot_every=1000, ready=lambda: False)
    await follower.start()
    running = asyncio.ensure_future(follower.run())
    bus.end = 6
    waiting = asyncio.ensure_future(follower.caught_up(patient=True))
    deadline = time.monotonic() + 5.0
    while "waiting on" not in caplog.text and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert caplog.text.count("the log has not reached sequence 6") == 1
    assert not waiting.done() and follower.sequence == 3
    bus.go_on.set()
    await asyncio.wait_for(waiting, timeout=5.0)
    assert follower.sequence == 6 and "the log reached sequence 6" in caplog.text
    running.cancel()
    await follower.close()


class BatchLog(FakeLog):
    """Events 1 and 2, then message 3: a batch of three. The first read stops after the batch's first event until
    `go_on` is set (a reader stopped with its task mid-batch); later reads deliver all of it."""

    def __init__(self) -> None:
        super().__init__(on_subjects={1, 2, 3})
        self.go_on = asyncio.Event()

    def read_log(self, start: int, subjects: Sequence[str] = (), max_bytes: int = 0) -> AsyncIterator[LogEntry]:
        self.reads.append(start)
        first_read = len(self.reads) == 1

        async def entries() -> AsyncIterator[LogEntry]:
            for number, sequence in enumerate(range(start, 4), 1):
                count = 3 if sequence == 3 else 1
                for index in range(count):
                    if first_read and sequence == 3 and index == 1:
                        await self.go_on.wait()
                    event = NodeDied(node_id=f"n{sequence}-{index}")
                    last = index == count - 1
                    yield LogEntry(sequence, event, b"", consumer="c", delivered=number, index=index, last=last)

        return entries()


@pytest.mark.anyio
async def test_a_batch_read_again_after_its_reader_stopped_half_way_folds_each_of_its_events_once() -> None:
    bus: Any = BatchLog()
    folded: list[str] = []

    def fold(event: AnyEvent, _sequence: int, _time_ns: int) -> None:
        assert isinstance(event, NodeDied)
        folded.append(event.node_id)

    store: Any = NoSnapshots()
    bus.on_subjects = {1, 2}  # the log ends at 2 while the follower starts
    follower = LogFollower(bus, store, "test", fold, lambda _s: b"", lambda _b, _s: None, snapshot_every=1000)
    await follower.start()
    bus.on_subjects = {1, 2, 3}
    running = asyncio.ensure_future(follower.run())
    while folded[-1:] != ["n3-0"]:
        await asyncio.sleep(0.01)
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await running
    assert follower.sequence == 2, "a batch counts as folded only once all of it is"
    await follower.fold_to_end(timeout=5.0)
    await follower.close()
    assert folded == ["n1-0", "n2-0", "n3-0", "n3-1", "n3-2"]
    assert follower.sequence == 3
