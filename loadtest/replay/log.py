"""The start-up replay benchmark's log, made by the scheduling core itself (`Cluster`, so every event is one the
scheduler could write): one `SchedulerElected`, one `NodeRegistered` per node, then a churn of actors, each one
`ActorPlaced` carrying its request (placed as submitted), the oldest `ActorRemoved` once `--live` actors run. Every
10th actor selects `tier=web` nodes. The log is cut at exactly `--events` events; the stream holds nothing else, so
event k has sequence k.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence

from loadtest.replay.figures import Rate, ReplayConfig, rate_of, say
from schemas import AnyEvent, SchedulerElected, ScheduleRequest, SelectorValue
from services.core import Cluster
from services.runtime.bus import Bus
from services.runtime.elections import record_election

APPEND_CHUNK = 4096
"""Events per `Bus.append` call (each call is pipelined, then waits for every ack)."""


def generate(config: ReplayConfig, progress: Callable[[int], None] = lambda _n: None) -> list[AnyEvent]:
    """Exactly `config.events` events written by the core (see the module's docstring for the mix)."""
    cluster = Cluster(config.seed, keep_history=False)
    cluster.fold(SchedulerElected(epoch=1, instance="replay-bench", event_id="scheduler-elected-1"), react=False)
    cluster.epoch, cluster.event_prefix = 1, "replay-bench-e1-"
    events: list[AnyEvent] = [SchedulerElected(epoch=1, instance="replay-bench", event_id="scheduler-elected-1")]
    tiers = ("web", "batch", "ml")

    def add_nodes() -> None:
        for index in range(config.nodes):
            labels = {"tier": tiers[index % len(tiers)]}
            cluster.add_node(f"node-{index:06d}", {"CPU": 64, "memory": 256e9}, labels, zone=f"z{index % 3}")

    events += cluster.decided(add_nodes).events
    running: deque[str] = deque()

    def submit_thousand(first: int) -> None:
        for number in range(first, first + 1000):
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

    number = 0
    while len(events) < config.events:
        before = len(events)
        events += cluster.decided(lambda: submit_thousand(number)).events  # noqa: B023 - called at once
        number += 1000
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


async def write_log(bus: Bus, events: Sequence[AnyEvent], config: ReplayConfig) -> Rate:
    """Append the events to an empty event stream; returns how fast the appends went."""
    await bus.ensure_streams()
    if await bus.last_sequence() != 0:
        raise RuntimeError(f"the event stream at {bus.settings.nats_url} is not empty")
    for event in events:
        if isinstance(event, SchedulerElected):
            await record_election(bus.js, event)  # as the lease winner does, or every reader would skip it
    cpu = time.process_time()
    append_s = await append_all(bus, events, lambda n: say(config, f"  appended {n:,} events"))
    cpu_s = time.process_time() - cpu
    if (last := await bus.last_sequence()) != len(events):
        raise RuntimeError(f"the log holds {last:,} events after appending {len(events):,}")
    say(config, f"appended {len(events):,} events in {append_s:.1f} s")
    return rate_of(len(events), append_s, cpu_s)
