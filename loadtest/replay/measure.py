"""One run of the start-up replay benchmark: servers started, the log generated and written, every phase
measured, the report assembled and judged."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from loadtest.replay.figures import ReplayConfig, ReplayReport, SnapshotFigures, rate_of, say
from loadtest.replay.log import generate, write_log
from loadtest.replay.starts import SERVICE, cold_start, read_only
from loadtest.replay.verdict import targets
from schemas import AnyEvent
from services.local.servers import LocalServer, nats_server, redis_server
from services.runtime import collector
from services.runtime.bus import Bus
from services.runtime.codec import decode, encode
from services.runtime.settings import Settings
from services.runtime.snapshots import SnapshotStore
from services.runtime.views import load_view
from services.scheduler.view import SchedulerView


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
        view.fold(decoded[sequence - 1], sequence)
    fold_s = time.perf_counter() - began
    began = time.perf_counter()
    with collector.paused():  # as `LogFollower.snapshot` builds it
        blob = view.dump(cut)
    dump_s = time.perf_counter() - began
    began = time.perf_counter()
    for sequence in range(cut + 1, len(decoded) + 1):
        view.fold(decoded[sequence - 1], sequence)
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


async def measure(config: ReplayConfig, nats_url: str, redis_url: str) -> ReplayReport:
    """Every phase against the servers at `nats_url` and `redis_url` (both must start empty)."""
    settings = Settings(nats_url=nats_url, redis_url=redis_url, instance="replay-bench")
    load_before = _load_average()
    began = time.perf_counter()
    events = generate(config, lambda n: say(config, f"  generated {n:,} events"))
    generate_s = time.perf_counter() - began
    total, cut = len(events), len(events) - config.tail
    event_types = dict(Counter(type(event).__name__ for event in events))
    say(config, f"generated {total:,} events in {generate_s:.1f} s: {event_types}")

    bus = await Bus.connect(settings, "replay-bench")
    try:
        appended = await write_log(bus, events, config)
        blobs = [encode(event) for event in events]  # what Bus.append wrote
        del events

        say(config, "cold start with no snapshot: the whole log is replayed")
        full = await cold_start(settings, bus, config, total)
        say(config, f"full replay: ready in {full['ready_s']:.2f} s, answered in {full['served_s']:.2f} s")

        say(config, "reading the log without folding")
        floor = await read_only(bus, total)

        say(config, "decoding and folding in process (no I/O)")
        folded = fold_in_process(blobs, cut, settings)
        snapshot = await save_snapshot(redis_url, cut, folded, (await bus.log_identity())[0])
        say(config, f"snapshot of {snapshot['bytes']:,} bytes saved at sequence {cut:,}")

        say(config, f"cold start with the snapshot: {config.tail:,} events of tail")
        restart = await cold_start(settings, bus, config, total)
        say(config, f"restart: ready in {restart['ready_s']:.2f} s, answered in {restart['served_s']:.2f} s")
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
        decode=rate_of(total, folded.decode_s),
        fold_only=rate_of(total, folded.fold_s),
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
        say(config, f"nats-server on {servers[0].port}, redis-server on {servers[1].port}, data in {folder}")
        nats_url = f"nats://127.0.0.1:{servers[0].port}"
        redis_url = f"redis://127.0.0.1:{servers[1].port}/0"
        return anyio.run(measure, config, nats_url, redis_url, backend="asyncio")
    raise AssertionError("unreachable")
