"""`python -m loadtest.replay`: how fast a service folds the log at start-up, and how soon it serves after a restart.

The figures come from the real start-up path of a service (`services.runtime.service.service_shell`: connect,
declare the streams, load the snapshot from Redis, replay the log's tail through `LogFollower`, serve) around a
`SchedulerView`, against a nats-server and a redis-server started in a temporary folder. Figures are printed,
never judged by the exit status.

The log is made by the scheduling core itself (`Cluster`, so every event is one the scheduler could write):
one `SchedulerElected`, one `NodeRegistered` per node, then a churn of actors, each one `ActorPlaced` carrying
its request (placed as submitted), the oldest `ActorRemoved` once `--live` actors run. Every 10th actor selects
`tier=web` nodes.
The log is cut at exactly `--events` events; the stream holds nothing else, so event k has sequence k.

Phases: generate, append (pipelined, as `Bus.append` does), a cold start on an empty Redis (full replay), the
log read without folding (the bus floor of a replay), decode and fold without I/O, a snapshot dumped at
`--events - --tail` and saved to Redis, then a cold start from that snapshot plus the tail. A start is "serving"
when a `DigestQuery` sent over NATS from another connection is answered; its digest must equal the fold's, and a
start whose view differs, or that logged errors (an event it could not apply), meets no requirement.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import anyio
import nats.errors
import redis.asyncio as redis

from schemas import AnyEvent, SchedulerElected, ScheduleRequest, SelectorValue
from schemas.queries import DigestQuery, DigestReply
from schemas.subjects import digest_subject
from services.cli.args import non_negative_int, positive_int
from services.core import Cluster
from services.runtime import collector
from services.runtime.bus import Bus
from services.runtime.codec import decode, encode
from services.runtime.elections import record_election
from services.runtime.servers import LocalServer, nats_server, redis_server
from services.runtime.service import service_shell
from services.runtime.settings import Settings
from services.runtime.snapshots import SnapshotStore
from services.runtime.views import load_view
from services.scheduler.view import SchedulerView

REPLAY_TARGET = 50_000.0
"""Events folded per second on start-up that the requirement asks for."""
RESTART_TARGET_S = 5.0
"""Seconds from a restart with a snapshot of a 1,000,000-event log until the service serves again."""
SERVICE = "scheduler"
"""The service whose start-up is measured (its snapshot key is `corral:snapshot:scheduler`)."""
APPEND_CHUNK = 4096
"""Events per `Bus.append` call (each call is pipelined, then waits for every ack)."""
QUERY_TIMEOUT = 60.0
STALL_S = 30.0
"""Seconds without progress after which a replay counts as stalled."""


@dataclass(frozen=True)
class ReplayConfig:
    """What to generate and measure."""

    events: int = 1_000_000
    nodes: int = 1000
    live: int = 10_000
    tail: int = Settings().snapshot_every
    """Events after the snapshot: by default the most a service replays on top of its last periodic snapshot."""
    seed: int = 0
    quiet: bool = False


class Start(TypedDict):
    """One cold start of the service through `service_shell`."""

    snapshot_sequence: int
    """The sequence of the snapshot found in Redis (0: none, the whole log is replayed)."""
    replayed: int
    """Events the follower folded from the log."""
    ready_s: float
    """From the start until the follower caught up with the log and the service subscribed its queries."""
    replayed_per_s: float
    served_s: float
    """From the start until a query sent over NATS from another connection was answered: a `DigestQuery`, the
    only query `service_shell` serves, and the heaviest (it dumps and hashes the whole view)."""
    cpu_s: float
    """CPU this process used until ready (below `ready_s`: the start waited on the servers or other processes)."""
    log_warnings: int
    log_errors: int
    """Errors the service logged (an event it could not apply, for one): a correct replay logs none."""
    sequence: int
    digest: str


class Rate(TypedDict):
    """Events handled in some seconds."""

    events: int
    seconds: float
    events_per_s: float
    cpu_s: float
    """CPU this process used meanwhile."""


class ReadOnly(Rate):
    """The log read without folding."""

    missing: int
    """Sequences that never arrived (lost in delivery): 0 when the read is complete."""


class SnapshotFigures(TypedDict):
    """The snapshot the restart loads: where it was taken, its size, and what each step costs."""

    sequence: int
    bytes: int
    dump_s: float
    save_s: float
    load_s: float
    """Reading it back from Redis."""
    restore_s: float
    """Decoding it and rebuilding the view with its indexes."""


class Goal(TypedDict):
    """A requirement: what it asks, what was measured, and whether it was met."""

    name: str
    goal: str
    measured: str
    met: bool


class ReplayReport(TypedDict):
    """Everything one run measured (seconds are wall-clock)."""

    events: int
    nodes: int
    live_actors: int
    """Actors in the view at the end of the log."""
    event_types: dict[str, int]
    log_bytes: int
    generate_s: float
    append: Rate
    full_replay: Start
    read_only: ReadOnly
    decode: Rate
    fold_only: Rate
    decode_and_fold_events_per_s: float
    snapshot: SnapshotFigures
    restart: Start
    import_s: float
    """A fresh interpreter importing the scheduler service: what a restarted process pays before `service_shell`."""
    restart_with_process_start_s: float
    fold_digest: str
    digests_equal: bool
    cores: int
    load_average_1m: list[float]
    """The machine's 1-minute load average when the run began and when it ended (other work skews the figures)."""
    targets: list[Goal]


def _progress(config: ReplayConfig, text: str) -> None:
    if not config.quiet:
        print(f"replay bench: {text}", file=sys.stderr, flush=True)


def _rate(events: int, seconds: float, cpu_s: float | None = None) -> Rate:
    return Rate(
        events=events,
        seconds=round(seconds, 3),
        events_per_s=round(events / seconds, 1) if seconds else 0.0,
        cpu_s=round(seconds if cpu_s is None else cpu_s, 3),
    )


# the log


def generate(config: ReplayConfig, progress: Callable[[int], None] = lambda _n: None) -> list[AnyEvent]:
    """Exactly `config.events` events written by the core (see the module's docstring for the mix)."""
    cluster = Cluster(config.seed, keep_history=False)
    cluster.fold(SchedulerElected(epoch=1, instance="replay-bench", event_id="scheduler-elected-1"), react=False)
    cluster.epoch, cluster.event_prefix = 1, "replay-bench-e1-"
    events: list[AnyEvent] = [SchedulerElected(epoch=1, instance="replay-bench", event_id="scheduler-elected-1")]
    tiers = ("web", "batch", "ml")
    for index in range(config.nodes):
        labels = {"tier": tiers[index % len(tiers)]}
        cluster.add_node(f"node-{index:06d}", {"CPU": 64, "memory": 256e9}, labels, zone=f"z{index % 3}")
    events += cluster.take_events()
    running: deque[str] = deque()
    number = 0
    while len(events) < config.events:
        for _ in range(1000):
            actor_id = f"actor-{number:08d}"
            resources = {"CPU": 1.0} if number % 2 else {"CPU": 0.5, "memory": 1e9}
            selector: dict[str, SelectorValue] = {"tier": "web"} if number % 10 == 0 else {}
            request = ScheduleRequest(
                actor_id, resources, labels={"app": f"svc{number % 100}"}, label_selector=selector
            )
            cluster.submit(request)
            running.append(actor_id)
            if len(running) > config.live:
                cluster.remove_actor(running.popleft())
            number += 1
        before = len(events)
        events += cluster.take_events()
        if before // 100_000 != len(events) // 100_000:
            progress(min(len(events), config.events))
    return events[: config.events]


async def append_all(bus: Bus, events: Sequence[AnyEvent], progress: Callable[[int], None]) -> float:
    """Append the events in chunks through `Bus.append`; returns the seconds it took."""
    began = time.perf_counter()
    for start in range(0, len(events), APPEND_CHUNK):
        await bus.append(events[start : start + APPEND_CHUNK])
        done = min(start + APPEND_CHUNK, len(events))
        if start // 100_000 != done // 100_000:
            progress(done)
    return time.perf_counter() - began


# cold starts


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
            _progress(config, f"  the service logged {tally.warnings:,} warnings and {tally.errors:,} errors")


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
                _progress(config, f"  folded up to sequence {view.sequence:,} of {total:,}")

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
    return ReadOnly(**_rate(readable, seconds, time.process_time() - cpu), missing=missing)


def _load_average() -> float:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return -1.0


def import_seconds() -> float:
    """Wall time of a fresh interpreter importing the scheduler service (a restarted process pays it first)."""
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import services.scheduler.app"], check=True)
    return time.perf_counter() - began


# the run


def _wrong(start: Start, fold_digest: str) -> str:
    """Why a start's view is not the fold of the log ("" when it is)."""
    problems = []
    if start["digest"] != fold_digest:
        problems.append("its view DIFFERS from the fold of the log")
    if start["log_errors"]:
        problems.append(f"{start['log_errors']:,} errors logged")
    return "; " + ", ".join(problems) if problems else ""


def targets(report: ReplayReport) -> list[Goal]:
    """The start-up requirements, judged on this run (a start whose view is wrong meets nothing)."""
    full, fold, restart = report["full_replay"], report["fold_only"], report["restart"]
    process = report["restart_with_process_start_s"]
    full_wrong, restart_wrong = _wrong(full, report["fold_digest"]), _wrong(restart, report["fold_digest"])
    return [
        Goal(
            name="startup_replay",
            goal=f"events folded/s on start-up >= {REPLAY_TARGET:,.0f} (log read from NATS, decoded, folded)",
            measured=f"{full['replayed_per_s']:,.0f}/s ({full['replayed']:,} events in {full['ready_s']:.2f} s)"
            + full_wrong,
            met=full["replayed_per_s"] >= REPLAY_TARGET and not full_wrong,
        ),
        Goal(
            name="fold_only",
            goal=f"events folded/s without I/O >= {REPLAY_TARGET:,.0f} (SchedulerView.apply on decoded events)",
            measured=f"{fold['events_per_s']:,.0f}/s (decode and fold {report['decode_and_fold_events_per_s']:,.0f}/s)",
            met=fold["events_per_s"] >= REPLAY_TARGET,
        ),
        Goal(
            name="restart",
            goal=f"restart with a snapshot of a {report['events']:,}-event log serves within {RESTART_TARGET_S:g} s",
            measured=(
                f"{restart['served_s']:.2f} s in process ({restart['replayed']:,}-event tail), "
                f"{process:.2f} s with the interpreter's start"
            )
            + restart_wrong,
            met=process <= RESTART_TARGET_S and not restart_wrong,
        ),
    ]


@dataclass
class InProcess:
    """The fold without I/O: decode every message, fold them all, dump the snapshot at the cut on the way."""

    decode_s: float
    fold_s: float
    dump_s: float
    blob: bytes
    digest: str
    live_actors: int


def fold_in_process(blobs: Sequence[bytes], cut: int, settings: Settings) -> InProcess:
    """Decode the log's messages as the bus does, fold them into a fresh `SchedulerView`, dump it at `cut`."""
    began = time.perf_counter()
    decoded: list[AnyEvent] = [decode(blob, AnyEvent, max_bytes=settings.max_message_bytes) for blob in blobs]
    decode_s = time.perf_counter() - began
    view = SchedulerView(settings.seed, settings.rare_resources)
    began = time.perf_counter()
    for sequence in range(1, cut + 1):
        view.apply(decoded[sequence - 1], sequence)
    fold_s = time.perf_counter() - began
    began = time.perf_counter()
    with collector.paused():  # as `LogFollower.snapshot` builds it
        blob = view.dump(cut)
    dump_s = time.perf_counter() - began
    began = time.perf_counter()
    for sequence in range(cut + 1, len(decoded) + 1):
        view.apply(decoded[sequence - 1], sequence)
    fold_s += time.perf_counter() - began
    return InProcess(decode_s, fold_s, dump_s, blob, view.digest(), len(view.cluster.view.actors))


async def save_snapshot(redis_url: str, cut: int, folded: InProcess, log_id: str) -> SnapshotFigures:
    """Save the snapshot as `LogFollower.snapshot` does, read it back and restore it, timing each step."""
    store = SnapshotStore(redis_url)
    try:
        began = time.perf_counter()
        if not await store.save(SERVICE, cut, folded.blob, log_id):
            raise RuntimeError(f"the snapshot at sequence {cut:,} was not saved to {redis_url}")
        save_s = time.perf_counter() - began
        began = time.perf_counter()
        found = await store.load(SERVICE)
        load_s = time.perf_counter() - began
    finally:
        await store.close()
    if found is None or found.sequence != str(cut):
        raise RuntimeError(f"the snapshot at sequence {cut:,} did not come back from {redis_url}")
    began = time.perf_counter()
    load_view(found.blob, cut)
    restore_s = time.perf_counter() - began
    return SnapshotFigures(
        sequence=cut,
        bytes=len(folded.blob),
        dump_s=round(folded.dump_s, 3),
        save_s=round(save_s, 3),
        load_s=round(load_s, 3),
        restore_s=round(restore_s, 3),
    )


async def write_log(bus: Bus, events: Sequence[AnyEvent], config: ReplayConfig) -> Rate:
    """Append the events to an empty event stream; returns how fast the appends went."""
    await bus.ensure_streams()
    if await bus.last_sequence() != 0:
        raise RuntimeError(f"the event stream at {bus.settings.nats_url} is not empty")
    for event in events:
        if isinstance(event, SchedulerElected):
            await record_election(bus.js, event)  # as the lease winner does, or every reader would skip it
    cpu = time.process_time()
    append_s = await append_all(bus, events, lambda n: _progress(config, f"  appended {n:,} events"))
    cpu_s = time.process_time() - cpu
    if (last := await bus.last_sequence()) != len(events):
        raise RuntimeError(f"the log holds {last:,} events after appending {len(events):,}")
    _progress(config, f"appended {len(events):,} events in {append_s:.1f} s")
    return _rate(len(events), append_s, cpu_s)


async def measure(config: ReplayConfig, nats_url: str, redis_url: str) -> ReplayReport:
    """Every phase against the servers at `nats_url` and `redis_url` (both must start empty)."""
    settings = Settings(nats_url=nats_url, redis_url=redis_url, instance="replay-bench")
    load_before = _load_average()
    began = time.perf_counter()
    events = generate(config, lambda n: _progress(config, f"  generated {n:,} events"))
    generate_s = time.perf_counter() - began
    total, cut = len(events), len(events) - config.tail
    event_types = dict(Counter(type(event).__name__ for event in events))
    _progress(config, f"generated {total:,} events in {generate_s:.1f} s: {event_types}")

    bus = await Bus.connect(settings, "replay-bench")
    try:
        appended = await write_log(bus, events, config)
        blobs = [encode(event) for event in events]  # what Bus.append wrote
        del events

        _progress(config, "cold start with no snapshot: the whole log is replayed")
        full = await cold_start(settings, bus, config, total)
        _progress(config, f"full replay: ready in {full['ready_s']:.2f} s, answered in {full['served_s']:.2f} s")

        _progress(config, "reading the log without folding")
        floor = await read_only(bus, total)

        _progress(config, "decoding and folding in process (no I/O)")
        folded = fold_in_process(blobs, cut, settings)
        snapshot = await save_snapshot(redis_url, cut, folded, (await bus.log_identity())[0])
        _progress(config, f"snapshot of {snapshot['bytes']:,} bytes saved at sequence {cut:,}")

        _progress(config, f"cold start with the snapshot: {config.tail:,} events of tail")
        restart = await cold_start(settings, bus, config, total)
        _progress(config, f"restart: ready in {restart['ready_s']:.2f} s, answered in {restart['served_s']:.2f} s")
    finally:
        await bus.close()

    import_s = import_seconds()
    report = ReplayReport(
        events=total,
        nodes=event_types.get("NodeRegistered", 0),
        live_actors=folded.live_actors,
        event_types=event_types,
        log_bytes=sum(len(blob) for blob in blobs),
        generate_s=round(generate_s, 3),
        append=appended,
        full_replay=full,
        read_only=floor,
        decode=_rate(total, folded.decode_s),
        fold_only=_rate(total, folded.fold_s),
        decode_and_fold_events_per_s=round(total / (folded.decode_s + folded.fold_s), 1),
        snapshot=snapshot,
        restart=restart,
        import_s=round(import_s, 3),
        restart_with_process_start_s=round(import_s + restart["served_s"], 3),
        fold_digest=folded.digest,
        digests_equal=full["digest"] == restart["digest"] == folded.digest,
        cores=os.cpu_count() or 0,
        load_average_1m=[load_before, _load_average()],
        targets=[],
    )
    report["targets"] = targets(report)
    return report


def run(config: ReplayConfig, data_dir: Path | None = None) -> ReplayReport:
    """Start nats-server and redis-server in `data_dir` (a temporary folder by default), measure, stop them."""
    with contextlib.ExitStack() as stack:
        folder = data_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="corral-replay-")))
        servers: list[LocalServer] = []

        @stack.callback
        def stop_servers() -> None:
            for server in reversed(servers):
                server.stop()

        servers.append(nats_server(folder / "nats").start())
        servers.append(redis_server(folder / "redis").start())
        _progress(config, f"nats-server on {servers[0].port}, redis-server on {servers[1].port}, data in {folder}")
        nats_url = f"nats://127.0.0.1:{servers[0].port}"
        redis_url = f"redis://127.0.0.1:{servers[1].port}/0"
        return anyio.run(measure, config, nats_url, redis_url, backend="asyncio")
    raise AssertionError("unreachable")


# output


def _verdict(met: bool) -> str:
    return "met" if met else "not met"


def _row(name: str, seconds: float, rate: str, cpu_s: float, note: str = "") -> str:
    return f"  {name:<32}{seconds:>9.2f} s{rate:>14}{cpu_s:>9.2f} s  {note}".rstrip()


def _logged(start: Start) -> str:
    if not (start["log_warnings"] or start["log_errors"]):
        return ""
    return f"; logged {start['log_warnings']:,} warnings, {start['log_errors']:,} errors"


def format_report(report: ReplayReport) -> str:
    """The figures as a table, then the requirements."""
    full, restart, snapshot = report["full_replay"], report["restart"], report["snapshot"]
    types = ", ".join(f"{name} {count:,}" for name, count in report["event_types"].items())
    rates = {name: report[name] for name in ("append", "read_only", "decode", "fold_only")}
    per_s = {name: f"{rate['events_per_s']:,.0f}/s" for name, rate in rates.items()}
    load = report["load_average_1m"]
    lines = [
        f"corral start-up replay: {report['events']:,} events ({report['log_bytes'] / 1e6:,.1f} MB of JSON), "
        f"{report['nodes']:,} nodes, {report['live_actors']:,} live actors at the end",
        f"  events (written by the core in {report['generate_s']:.1f} s): {types}",
        f"  machine: {report['cores']} cores, 1-minute load average {load[0]:.2f} at the start, "
        f"{load[1]:.2f} at the end",
        "",
        f"  {'phase':<32}{'wall':>11}{'events/s':>14}{'cpu':>11}",
        _row("append (Bus.append, pipelined)", rates["append"]["seconds"], per_s["append"], rates["append"]["cpu_s"]),
        _row(
            "cold start, no snapshot",
            full["ready_s"],
            f"{full['replayed_per_s']:,.0f}/s",
            full["cpu_s"],
            f"{full['replayed']:,} events; answered a query at {full['served_s']:.2f} s{_logged(full)}",
        ),
        _row(
            "log read only (Bus.read_log)",
            rates["read_only"]["seconds"],
            per_s["read_only"],
            rates["read_only"]["cpu_s"],
            f"{report['read_only']['missing']:,} sequences never arrived" if report["read_only"]["missing"] else "",
        ),
        _row("decode only (codec.decode)", rates["decode"]["seconds"], per_s["decode"], rates["decode"]["cpu_s"]),
        _row(
            "fold only (SchedulerView.apply)",
            rates["fold_only"]["seconds"],
            per_s["fold_only"],
            rates["fold_only"]["cpu_s"],
        ),
        _row(
            "cold start from the snapshot",
            restart["ready_s"],
            f"{restart['replayed_per_s']:,.0f}/s",
            restart["cpu_s"],
            f"{restart['replayed']:,} events of tail; answered a query at {restart['served_s']:.2f} s"
            + _logged(restart),
        ),
        "",
        f"  snapshot at sequence {snapshot['sequence']:,}: {snapshot['bytes'] / 1e6:,.2f} MB; "
        f"dump {snapshot['dump_s']:.3f} s, save {snapshot['save_s']:.3f} s, load {snapshot['load_s']:.3f} s, "
        f"decode and restore {snapshot['restore_s']:.3f} s",
        f"  a fresh interpreter importing the scheduler: {report['import_s']:.2f} s "
        f"(restart with the process start: {report['restart_with_process_start_s']:.2f} s)",
        f"  digests of the full replay, the restart and the fold "
        f"{'are equal' if report['digests_equal'] else 'DIFFER'}: "
        f"{full['digest']} {restart['digest']} {report['fold_digest']}",
        "",
        "requirements:",
    ]
    width = max(len(_verdict(goal["met"])) for goal in report["targets"])
    lines += [f"  {_verdict(g['met']).ljust(width)}  {g['goal']}: {g['measured']}" for g in report["targets"]]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The options of `python -m loadtest.replay`."""
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.replay",
        description=(
            "Start-up replay benchmark: write an event log made by the scheduling core to a local nats-server, "
            "then time a scheduler view's cold start replaying the whole log, the fold alone, and a restart "
            "from a Redis snapshot plus the log's tail. Figures are printed, never judged by the exit status."
        ),
    )
    parser.add_argument("--events", type=positive_int, default=1_000_000, help="events in the log (default: 1000000)")
    parser.add_argument("--nodes", type=positive_int, default=1000, help="nodes registered first (default: 1000)")
    parser.add_argument("--live", type=positive_int, default=10_000, help="actors running at once (default: 10000)")
    parser.add_argument(
        "--tail",
        type=non_negative_int,
        default=ReplayConfig.tail,
        help=f"events after the snapshot the restart loads (default: {ReplayConfig.tail}, CORRAL_SNAPSHOT_EVERY's)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the core that writes the log")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the text")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--data-dir", type=Path, help="keep the servers' data and logs in this folder")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its figures; 0 whether or not the targets were met, 1 if the run failed."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.tail >= args.events:
        parser.error(f"--tail {args.tail} must be below --events {args.events}")
    config = ReplayConfig(
        events=args.events, nodes=args.nodes, live=args.live, tail=args.tail, seed=args.seed, quiet=args.quiet
    )
    try:
        report = run(config, args.data_dir)
    except KeyboardInterrupt:
        print("python -m loadtest.replay: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # the run itself failed (no servers, a bad log): say why, no figures
        print(f"python -m loadtest.replay: the run failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(report) if args.json else format_report(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
