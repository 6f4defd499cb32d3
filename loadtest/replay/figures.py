"""The start-up replay benchmark's configuration and its report: what a run is asked to do and what it measured."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TypedDict

from services.runtime.settings import Settings


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


def say(config: ReplayConfig, text: str) -> None:
    """A progress line on stderr, unless the run is quiet."""
    if not config.quiet:
        print(f"replay bench: {text}", file=sys.stderr, flush=True)


def rate_of(events: int, seconds: float, cpu_s: float | None = None) -> Rate:
    """`events` handled in `seconds` (and `cpu_s` of CPU: `seconds` when not given)."""
    return Rate(
        events=events,
        seconds=round(seconds, 3),
        events_per_s=round(events / seconds, 1) if seconds else 0.0,
        cpu_s=round(seconds if cpu_s is None else cpu_s, 3),
    )
