"""Simulated users: closed-loop users (send, await, repeat) and an open-loop sender at a fixed rate."""

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


@dataclass
class Outcome:
    """What a phase leaves behind besides its recorder: actors still held, and the open loop's health."""

    held: list[str] = field(default_factory=list)
    dropped: int = 0
    lag_p99_ms: float = 0.0
    lag_max_ms: float = 0.0
    unfinished: int = 0


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


async def open_loop(
    target: Target, conns: Sequence[Connection], drive: Drive, drain_timeout: float
) -> tuple[Recorder, Outcome]:
    """Requests at `drive.rate` per second whatever the replies do; latency is counted from each publish."""
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

    interval = 1.0 / drive.rate
    next_at = began
    number = 0
    while next_at < recorder.end:
        now = time.perf_counter()
        while next_at <= now and next_at < recorder.end:
            lags.append((now - next_at) * 1000.0)
            if len(tasks) >= drive.max_in_flight:
                outcome.dropped += 1
            else:
                task = asyncio.create_task(one(number))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            number += 1
            next_at += interval
        await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
    if tasks:
        _, unfinished = await asyncio.wait(set(tasks), timeout=drain_timeout)
        outcome.unfinished = len(unfinished)
        for task in unfinished:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*unfinished, return_exceptions=True)
    lags.sort()
    outcome.lag_p99_ms = round(percentile(lags, 0.99), 2)
    outcome.lag_max_ms = round(lags[-1] if lags else 0.0, 2)
    outcome.held = list(held)
    return recorder, outcome
