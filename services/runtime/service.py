"""The shell of an event-sourced service: connect, declare streams, load the view, serve, and stop cleanly."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import nats.errors

from schemas import AnyEvent
from schemas.queries import DigestQuery, DigestReply, HealthQuery, HealthReply
from schemas.subjects import digest_subject, health_subject
from services import CORE_BUILD
from services.runtime import metrics
from services.runtime.bus import Bus
from services.runtime.commands import Responder
from services.runtime.connection import sent
from services.runtime.follower import LogFollower
from services.runtime.pages import Pager
from services.runtime.queries import query_handler
from services.runtime.settings import Settings
from services.runtime.snapshots import SnapshotStore

log = logging.getLogger("corral.service")

STOP_FOLD_SECONDS = 2.0
"""At stop, how long a view may take to fold the log's end before its last snapshot (skipped if it cannot)."""


class View(Protocol):
    """What a service's view offers its follower."""

    def fold(self, event: AnyEvent, sequence: int, time_ns: int) -> None:
        """Fold one event, stored in the log at `time_ns` (Unix nanoseconds, the server's clock)."""

    def dump(self, sequence: int) -> bytes:
        """Snapshot bytes as of `sequence`."""

    def load(self, blob: bytes, sequence: int) -> None:
        """Replace the view from snapshot bytes of the view at `sequence` (raising, the view untouched, if not)."""

    def digest(self) -> str:
        """The canonical hash of the view."""


@dataclass
class Shell:
    """A running service's connections and follower; subscriptions are closed on the way out."""

    name: str
    """The service's name: its queue group on the bus."""
    bus: Bus
    store: SnapshotStore
    follower: LogFollower
    pager: Pager
    """Fits query answers into the server's payload limit (list answers in pages, each of one listing)."""
    subscriptions: list[Any] = field(default_factory=list)

    async def serve(self, routes: Mapping[str, Responder]) -> None:
        """Answer each subject of `routes` with its responder, one instance of the service per request."""
        for subject, responder in routes.items():
            self.subscriptions.append(await self.bus.serve(subject, responder, queue=self.name))

    async def caught_up(self) -> None:
        """Return once the view has folded the log up to its end as of now (what other writers appended too)."""
        await self.follower.caught_up()


SETTLE_SECONDS = 5.0
"""How long a digest query waits for the view to be a fold of the log (a leader's decisions all stored and read
back) before it answers with the view as it is."""


def digest_handler(
    digest: Callable[[], DigestReply], settled: Callable[[], bool], patience: float = SETTLE_SECONDS
) -> Responder:
    """Answer a digest query with `digest()`, taken once `settled()` (or after `patience` seconds, when it never
    is: appends stuck in an outage): a leader's view holds its decisions before the log does, and a digest taken
    then differs from every replay of the log at the same sequence."""

    async def wait_settled() -> None:
        deadline = time.monotonic() + patience
        while not settled() and time.monotonic() < deadline:
            await anyio.sleep(0.01)

    return query_handler(DigestQuery, lambda _query: digest(), before=wait_settled)


@asynccontextmanager
async def service_shell(
    settings: Settings,
    name: str,
    view: View,
    *,
    ready: Callable[[], bool] = lambda: True,
    settled: Callable[[], bool] = lambda: True,
    subjects: Sequence[str] = (),
) -> AsyncIterator[Shell]:
    """Connect, create streams, load the snapshot and replay the log (only `subjects`, when given, are read);
    on exit, snapshot and close. `ready`: the view may be saved as a snapshot; `settled`: it is a fold of the log
    up to the sequence it folded (a digest query waits for that)."""
    bus = await Bus.connect(settings, name)
    store = SnapshotStore(settings.redis_url)
    follower = LogFollower(
        bus,
        store,
        name,
        view.fold,
        view.dump,
        view.load,
        snapshot_every=settings.snapshot_every,
        ready=ready,
        subjects=subjects,
    )
    shell = Shell(name, bus, store, follower, Pager(lambda: follower.sequence, lambda: bus.nc.max_payload, ready))
    _observe(follower)
    try:
        await bus.ensure_streams()
        await follower.start()
        digest = digest_handler(lambda: DigestReply(view.digest(), follower.sequence, follower.skipped), settled)
        shell.subscriptions.append(await bus.serve(digest_subject(name), digest))
        health = query_handler(HealthQuery, lambda _q: _health(follower))
        shell.subscriptions.append(await bus.serve(health_subject(name), health))
        with contextlib.suppress(TimeoutError, nats.errors.Error):  # a NATS outage: registered once it reconnects
            await sent(bus.nc)  # the server knows the subscriptions: "serving" means a query reaches this one
        log.info("%s: serving (the core's %s build)", name, CORE_BUILD)
        yield shell
    except Exception:
        if not follower.replaced:  # a failure met because the log went away exits as that (EXIT_LOG_REPLACED)
            with contextlib.suppress(TimeoutError, nats.errors.Error):
                await follower.check_log()
        raise
    finally:
        with anyio.CancelScope(shield=True):
            await _quietly(_let_go(shell, ready), f"{name}: stopping")
            await _quietly(follower.close(), f"{name}: closing the log reader")
            await _quietly(store.close(), f"{name}: closing Redis")
            await _quietly(bus.close(), f"{name}: closing NATS")


async def _let_go(shell: Shell, ready: Callable[[], bool]) -> None:
    """Unsubscribe, and save a last snapshot when the view may be saved."""
    for subscription in shell.subscriptions:
        await subscription.unsubscribe()
    follower = shell.follower
    if follower.sequence and not ready():
        await follower.fold_to_end(timeout=STOP_FOLD_SECONDS)  # the echo of our own last events
    if follower.sequence and ready():
        await follower.snapshot()


async def _quietly(step: Awaitable[object], what: str) -> None:
    """Run one clean-up step; a failure (the bus may be down) is logged, never raised over the service's own end."""
    try:
        await step
    except Exception as error:
        log.warning("%s failed: %s", what, error or type(error).__name__)


def _health(follower: LogFollower) -> HealthReply:
    """The answer to a health query: the view's sequence, why snapshots fail (if they do), the last one's age."""
    at = follower.snapshot_at
    age = None if at is None else round(time.monotonic() - at, 3)
    return HealthReply(follower.sequence, follower.saver.failing, age)


def _observe(follower: LogFollower) -> None:
    """The log follower's gauges: events folded and skipped, lag, the last snapshot's age and size."""
    metrics.total(
        "corral.events.folded",
        "{event}",
        "Events of the log folded into the view",
        metrics.one(lambda: follower.folded),
    )
    metrics.total(
        "corral.events.skipped",
        "{event}",
        "Events not folded (sent to dead letters)",
        metrics.one(lambda: follower.skipped),
    )
    metrics.gauge(
        "corral.follower.sequence",
        "{event}",
        "The log sequence the view has folded up to",
        metrics.one(lambda: follower.sequence),
    )
    metrics.gauge(
        "corral.follower.lag",
        "{event}",
        "Events appended but not yet folded into the view",
        metrics.one(lambda: follower.lag),
    )
    metrics.gauge(
        "corral.snapshot.size",
        "By",
        "Size of the view's last snapshot saved or loaded",
        metrics.one(lambda: follower.snapshot_bytes),
    )
    metrics.gauge(
        "corral.snapshot.age",
        "s",
        "Seconds since the view was last saved or loaded as a snapshot",
        _snapshot_age(follower),
    )
    metrics.gauge(
        "corral.snapshot.failing",
        "1",
        "1 while the view's snapshots are not being saved (Redis down, read-only or not answering), else 0",
        metrics.one(lambda: 1 if follower.saver.failing else 0),
    )


def _snapshot_age(follower: LogFollower) -> metrics.Readings:
    def read() -> Iterable[tuple[float, metrics.Attributes]]:
        at = follower.snapshot_at
        return [] if at is None else [(time.monotonic() - at, {})]

    return read
