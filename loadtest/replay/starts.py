"""Cold starts of the measured service through its real start-up path (`service_shell`), and the log read
without folding: the start-up replay benchmark's measurements over NATS and Redis."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import sys
import time
from collections.abc import AsyncGenerator, Iterator

import anyio
import nats.errors
import redis.asyncio as redis

from loadtest.replay.figures import ReadOnly, ReplayConfig, Start, rate_of, say
from schemas.queries import DigestQuery, DigestReply
from schemas.subjects import digest_subject
from services.runtime.bus import Bus
from services.runtime.codec import decode, encode
from services.runtime.service import service_shell
from services.runtime.settings import Settings
from services.runtime.snapshots import SnapshotStore
from services.scheduler.view import SchedulerView

SERVICE = "scheduler"
"""The service whose start-up is measured (its snapshot key is `corral:snapshot:scheduler`)."""
QUERY_TIMEOUT = 60.0
STALL_S = 30.0
"""Seconds without progress after which a replay counts as stalled."""


class _LogTally(logging.Handler):
    """Counts the service's warnings and errors while a start runs; echoes its info lines and the first few others."""

    SHOWN = 5

    def __init__(self, echo: bool) -> None:
        super().__init__(logging.INFO)
        self.echo = echo
        self.warnings = self.errors = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            self.errors += 1
        elif record.levelno >= logging.WARNING:
            self.warnings += 1
        if not self.echo or self.warnings + self.errors > self.SHOWN:
            return
        print(f"replay bench:   {record.name}: {record.getMessage()[:300]}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _service_logs(config: ReplayConfig) -> Iterator[_LogTally]:
    """The service's log lines while a start runs: counted, and the telling ones shown on stderr."""
    logger = logging.getLogger("corral")
    tally = _LogTally(echo=not config.quiet)
    old_level = logger.level
    logger.addHandler(tally)
    logger.setLevel(logging.INFO)
    try:
        yield tally
    finally:
        logger.removeHandler(tally)
        logger.setLevel(old_level)
        if tally.warnings + tally.errors > _LogTally.SHOWN:
            say(config, f"  the service logged {tally.warnings:,} warnings and {tally.errors:,} errors")


async def cold_start(settings: Settings, asker: Bus, config: ReplayConfig, total: int) -> Start:
    """Start the service as a process would (`service_shell` around a fresh `SchedulerView`), until it answers.

    Raises if the replay stops advancing for `STALL_S` seconds (a message lost in delivery leaves the follower
    waiting for a sequence that never comes).
    """
    view = SchedulerView(settings.seed, settings.rare_resources)
    found = await _stored_sequence(settings)
    stalled: list[int] = []

    async def watchdog(scope: anyio.CancelScope) -> None:
        seen, since = -1, time.monotonic()
        for tick in itertools.count(1):
            await asyncio.sleep(1.0)
            if view.sequence != seen:
                seen, since = view.sequence, time.monotonic()
            elif time.monotonic() - since > STALL_S:
                stalled.append(seen)
                scope.cancel()
                return
            if tick % 5 == 0:
                say(config, f"  folded up to sequence {view.sequence:,} of {total:,}")

    with _service_logs(config) as tally, anyio.CancelScope() as scope:
        began, cpu = time.perf_counter(), time.process_time()
        watching = asyncio.create_task(watchdog(scope))
        try:
            # ready=False: a measured start never writes a snapshot on the way out (the start itself is unchanged)
            async with service_shell(settings, SERVICE, view, ready=lambda: False) as shell:
                try:
                    ready_s, cpu_s = time.perf_counter() - began, time.process_time() - cpu
                    watching.cancel()
                    answer = await ask_digest(asker)
                    served_s = time.perf_counter() - began
                    sequence = shell.follower.sequence
                finally:
                    await shell.follower.close()
        finally:
            watching.cancel()
    if stalled:
        raise RuntimeError(f"the replay stalled at sequence {stalled[0]:,} of {total:,} for {STALL_S:.0f} s")
    replayed = sequence - found
    return Start(
        snapshot_sequence=found,
        replayed=replayed,
        ready_s=round(ready_s, 3),
        replayed_per_s=round(replayed / ready_s, 1),
        served_s=round(served_s, 3),
        cpu_s=round(cpu_s, 3),
        log_warnings=tally.warnings,
        log_errors=tally.errors,
        sequence=answer.sequence,
        digest=answer.digest,
    )


async def ask_digest(asker: Bus) -> DigestReply:
    """Ask the service for its digest over NATS, as a client would, until it answers (its subscription may still
    be on its way to the server when `service_shell` hands over: then nobody responds yet)."""
    deadline = time.monotonic() + QUERY_TIMEOUT
    while True:
        try:
            reply = await asker.nc.request(digest_subject(SERVICE), encode(DigestQuery()), timeout=QUERY_TIMEOUT)
        except nats.errors.NoRespondersError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.002)
            continue
        answer: DigestReply = decode(reply.data, DigestReply)
        return answer


async def _stored_sequence(settings: Settings) -> int:
    client = redis.Redis.from_url(settings.redis_url)
    try:
        stored = await client.hget(SnapshotStore.key(SERVICE), "sequence")
    finally:
        await client.aclose()
    return 0 if stored is None else int(stored)


async def read_only(bus: Bus, total: int) -> ReadOnly:
    """The log read through `Bus.read_log` (delivery and decoding) with nothing folded: the floor of a replay.

    Counts the sequences that never arrived (`missing`); stops once the last one arrived or nothing came for
    `STALL_S` seconds.
    """
    progress = [0]

    async def watchdog(scope: anyio.CancelScope) -> None:
        seen, since = -1, time.monotonic()
        while True:
            await asyncio.sleep(1.0)
            if progress[0] != seen:
                seen, since = progress[0], time.monotonic()
            elif time.monotonic() - since > STALL_S:
                scope.cancel()
                return

    began, cpu = time.perf_counter(), time.process_time()
    readable = last = missing = 0
    entries = bus.read_log(1, max_bytes=bus.settings.max_message_bytes)
    with anyio.CancelScope() as scope:
        watching = asyncio.create_task(watchdog(scope))
        try:
            async for entry in entries:
                missing += max(0, entry.sequence - last - 1)
                last = progress[0] = max(last, entry.sequence)
                readable += entry.event is not None
                if last >= total:
                    break
        finally:
            watching.cancel()
            if isinstance(entries, AsyncGenerator):
                await entries.aclose()  # unsubscribe now, while the bus is open
    seconds = time.perf_counter() - began
    missing += total - last
    return ReadOnly(**rate_of(readable, seconds, time.process_time() - cpu), missing=missing)
