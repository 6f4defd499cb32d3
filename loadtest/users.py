"""Simulated users: closed-loop users (send, await, repeat) and an open-loop sender at a fixed rate.

With `Drive.batch` above 1, a user sends its submits that many at a time in one batch message (each request drawn
from the mix as it would be alone) and removes what it must remove that many at a time too; every request of a
batch is recorded as one request, timed as its batch's round trip."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from loadtest.stats import Recorder, percentile
from loadtest.transport import Connection, Result, Target
from loadtest.workloads import REMOVE, WORKLOADS, Mix, Ticket, Workload
from schemas.commands import MAX_BATCH

ERROR_PAUSE = 0.05
"""A user that failed pauses this long before its next request, so a dead mesh is not hammered."""


@dataclass
class Drive:
    """How users are driven in one phase."""

    tag: str
    """Prefix of actor ids and labels: unique per run and phase."""
    users: int
    seconds: float
    warmup: float
    hold: int
    """A user removes its oldest actor once it holds more than this many."""
    seed: int = 0
    rate: float = 0.0
    """Requests per second for the open loop (0: closed loop)."""
    max_in_flight: int = 5000
    """Open loop: arrivals beyond this many outstanding requests are dropped (and counted)."""
    batch: int = 1
    """Requests per message (1 to `MAX_BATCH`): above 1, submits and removals go in batches this large."""

    def __post_init__(self) -> None:
        if not 1 <= self.batch <= MAX_BATCH:
            raise ValueError(f"batch {self.batch} must be 1 to {MAX_BATCH:,} requests")


@dataclass
class Outcome:
    """What a phase leaves behind besides its recorder: actors still held, and the open loop's health."""

    held: list[str] = field(default_factory=list)
    dropped: int = 0
    """Open loop: requests not sent, past `Drive.max_in_flight` (a batch counts its requests)."""
    lag_p99_ms: float = 0.0
    lag_max_ms: float = 0.0
    unfinished: int = 0
    """Open loop: requests still unanswered once the drain's timeout passed (a batch counts its requests)."""

    def absorb(self, other: Outcome) -> None:
        """Add what another run of users left behind."""
        self.held += other.held
        self.dropped += other.dropped
        self.unfinished += other.unfinished
        self.lag_p99_ms = max(self.lag_p99_ms, other.lag_p99_ms)
        self.lag_max_ms = max(self.lag_max_ms, other.lag_max_ms)


class _Ids:
    """Per-user request counters, overall and per workload (affinity groups count within one workload)."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.total: Counter[str] = Counter()
        self.per_workload: Counter[tuple[str, str]] = Counter()

    def ticket(self, user: int, workload: str) -> Ticket:
        name = f"{self.tag}u{user}"
        ticket = Ticket(f"{name}-{self.total[name]}", name, self.per_workload[name, workload])
        self.total[name] += 1
        self.per_workload[name, workload] += 1
        return ticket


def _held(result: Result) -> bool:
    return result.outcome in ("placed", "pending")


async def _submit_batch(
    target: Target, conn: Connection, recorder: Recorder, mix: Mix, ids: _Ids, user: int, size: int, held: deque[str]
) -> bool:
    """`size` requests drawn as `size` single ones would be, sent in one batch; whether any of them failed."""
    drawn: list[tuple[Workload, Ticket]] = []
    for _ in range(size):
        workload = mix.draw()
        drawn.append((workload, ids.ticket(user, workload.name)))
    results = await target.submit_many(conn, [workload.build(ticket) for workload, ticket in drawn])
    for (workload, ticket), result in zip(drawn, results, strict=True):
        recorder.add(workload.name, result)
        if _held(result):
            held.append(ticket.actor_id)
    return any(result.outcome == "error" for result in results)


async def _remove_batches(
    target: Target, conn: Connection, recorder: Recorder, held: deque[str], most: int, size: int
) -> None:
    """Remove the oldest actors beyond `most`, `size` at most in each batch message."""
    while len(held) > most:
        oldest = [held.popleft() for _ in range(min(size, len(held) - most))]
        for result in await target.remove_many(conn, oldest):
            recorder.add(REMOVE, result)


async def closed_loop(
    target: Target, conns: Sequence[Connection], drive: Drive, workloads: tuple[Workload, ...] = WORKLOADS
) -> tuple[Recorder, Outcome]:
    """`drive.users` users, each sending one request at a time (drawn from `workloads`) until the phase ends."""
    began = time.perf_counter()
    recorder = Recorder(began + drive.warmup, began + drive.warmup + drive.seconds)
    ids = _Ids(drive.tag)

    async def user(index: int) -> list[str]:
        conn = conns[index % len(conns)]
        mix = Mix(drive.seed * 7919 + index, workloads)
        held: deque[str] = deque()
        while time.perf_counter() < recorder.end:
            if drive.batch > 1:
                await _remove_batches(target, conn, recorder, held, drive.hold, drive.batch)
                if await _submit_batch(target, conn, recorder, mix, ids, index, drive.batch, held):
                    await asyncio.sleep(ERROR_PAUSE)
                continue
            while len(held) > drive.hold:
                recorder.add(REMOVE, await target.remove(conn, held.popleft()))
            workload = mix.draw()
            ticket = ids.ticket(index, workload.name)
            result = await target.submit(conn, workload.build(ticket))
            recorder.add(workload.name, result)
            if _held(result):
                held.append(ticket.actor_id)
            elif result.outcome == "error":
                await asyncio.sleep(ERROR_PAUSE)
        return list(held)

    held = await asyncio.gather(*(user(index) for index in range(drive.users)))
    return recorder, Outcome(held=[actor for actors in held for actor in actors])


async def _drain(tasks: set[asyncio.Task[None]], timeout: float) -> int:
    """Wait up to `timeout` for the requests still out; cancel the rest and say how many they were."""
    if not tasks:
        return 0
    _, unfinished = await asyncio.wait(set(tasks), timeout=timeout)
    for task in unfinished:
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.gather(*unfinished, return_exceptions=True)
    return len(unfinished)


async def open_loop(
    target: Target, conns: Sequence[Connection], drive: Drive, drain_timeout: float
) -> tuple[Recorder, Outcome]:
    """Requests at `drive.rate` per second whatever the replies do (with `drive.batch` above 1: batches of that many
    at `drive.rate / drive.batch` per second); latency is counted from each publish."""
    assert drive.rate > 0, drive
    began = time.perf_counter()
    recorder = Recorder(began + drive.warmup, began + drive.warmup + drive.seconds)
    ids = _Ids(drive.tag)
    mixes = [Mix(drive.seed * 7919 + index) for index in range(drive.users)]
    held: deque[str] = deque()
    hold_total = drive.hold * drive.users
    outcome = Outcome()
    tasks: set[asyncio.Task[None]] = set()
    lags: list[float] = []

    async def batch(number: int) -> None:
        user = number % drive.users
        conn = conns[number % len(conns)]
        await _submit_batch(target, conn, recorder, mixes[user], ids, user, drive.batch, held)
        await _remove_batches(target, conn, recorder, held, hold_total, drive.batch)

    async def one(number: int) -> None:
        user = number % drive.users
        conn = conns[number % len(conns)]
        workload = mixes[user].draw()
        ticket = ids.ticket(user, workload.name)
        result = await target.submit(conn, workload.build(ticket))
        recorder.add(workload.name, result)
        if _held(result):
            held.append(ticket.actor_id)
            if len(held) > hold_total:
                recorder.add(REMOVE, await target.remove(conn, held.popleft()))

    send = one if drive.batch == 1 else batch
    interval = drive.batch / drive.rate
    next_at = began
    number = 0
    while next_at < recorder.end:
        now = time.perf_counter()
        while next_at <= now and next_at < recorder.end:
            lags.append((now - next_at) * 1000.0)
            if len(tasks) * drive.batch >= drive.max_in_flight:
                outcome.dropped += drive.batch
            else:
                task = asyncio.create_task(send(number))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            number += 1
            next_at += interval
        await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
    outcome.unfinished = await _drain(tasks, drain_timeout) * drive.batch  # a batch's submits, as `dropped` counts
    lags.sort()
    outcome.lag_p99_ms = round(percentile(lags, 0.99), 2)
    outcome.lag_max_ms = round(lags[-1] if lags else 0.0, 2)
    outcome.held = list(held)
    return recorder, outcome
