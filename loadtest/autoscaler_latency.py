"""`python -m loadtest.autoscaler_latency`: how long a pending actor waits for the autoscaler's launch request.

An embedded mesh with the autoscaler (`local` provider, one 1-CPU node type) receives actors one at a time, at
random moments within the decision interval; each needs a node of its own. Both moments are read from the event
log, stamped by nats-server's clock: the actor's first `ActorPending` and the first `NodesLaunchRequested`
naming it. Prints the figures beside the target (one interval plus 100 ms); it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from schemas import ActorPending, ActorPlaced, AnyEvent, NodesLaunchRequested, ScheduleRequest
from services.cli.args import positive_int
from services.client import Client
from services.local.mesh import AUTOSCALER, SERVICES, Mesh, start_mesh
from services.runtime.bus import Bus
from services.runtime.settings import Settings

NODE_TYPES = """
provider: {type: local}
idle_timeout_s: 600
upscaling_speed: 100
launch_timeout_s: 60
node_types:
  cpu-1:
    resources: {CPU: 1}
    max_workers: 1000
"""
TARGET_EXTRA_S = 0.1
"""The bound: a launch request at most one interval plus this after the work went pending."""


@dataclass(frozen=True)
class Timeline:
    """Moments read from the log (Unix seconds, stamped by nats-server): per actor, its first `ActorPending`, the
    first `NodesLaunchRequested` naming it and its first `ActorPlaced`."""

    pending: dict[str, float] = field(default_factory=dict)
    launched: dict[str, float] = field(default_factory=dict)
    placed: dict[str, float] = field(default_factory=dict)

    def delays(self, until: dict[str, float]) -> list[float]:
        """Seconds from each actor's first pending moment to its moment in `until` (actors in both only)."""
        return [until[actor] - moment for actor, moment in self.pending.items() if actor in until]


async def timed_events(nats_url: str) -> list[tuple[float, AnyEvent]]:
    """The whole log, in order: each readable event with the moment nats-server stored it (Unix seconds)."""
    bus = await Bus.connect(Settings.from_env({"CORRAL_NATS_URL": nats_url}), "loadtest-log-reader", timeout=10.0)
    try:
        return [(entry.time_ns / 1e9, entry.event) async for entry in bus.read_held() if entry.event is not None]
    finally:
        await bus.close()


def event_times(events: Sequence[tuple[float, AnyEvent]]) -> Timeline:
    """Each actor's first pending moment, the first launch request naming it and its first placement."""
    timeline = Timeline()
    for moment, event in events:
        if isinstance(event, ActorPending):
            timeline.pending.setdefault(event.actor_id, moment)
        elif isinstance(event, ActorPlaced):
            timeline.placed.setdefault(event.actor_id, moment)
        elif isinstance(event, NodesLaunchRequested):
            for work_id in event.work:
                timeline.launched.setdefault(work_id, moment)
    return timeline


async def drive(mesh: Mesh, actors: int, interval: float, seed: int) -> list[float]:
    """Submit `actors` one at a time at random phases of the interval; wait for all; the delays in seconds."""
    spacing = random.Random(seed)
    async with Client(mesh.nats_url, timeout=30.0) as client:
        await client.wait_ready(timeout=60.0)
        await client.wait_autoscaler(timeout=60.0)
        for index in range(actors):
            await client.submit(ScheduleRequest(f"actor-{index:04d}", {"CPU": 1}))
            await asyncio.sleep(spacing.uniform(0.0, interval))
        for index in range(actors):
            await client.wait_placed(f"actor-{index:04d}", timeout=120.0)
    timeline = event_times(await timed_events(mesh.nats_url))
    return timeline.delays(timeline.launched)


def report(delays: list[float], actors: int, interval: float) -> dict[str, float | int]:
    """The figures: how many delays were seen, and their p50 / p95 / max in ms, beside the target."""
    ordered = sorted(delays)
    return {
        "actors": actors,
        "measured": len(ordered),
        "interval_ms": interval * 1000,
        "target_ms": (interval + TARGET_EXTRA_S) * 1000,
        "p50_ms": statistics.median(ordered) * 1000,
        "p95_ms": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1000,
        "max_ms": ordered[-1] * 1000,
    }


def build_parser() -> argparse.ArgumentParser:
    """The options of `python -m loadtest.autoscaler_latency`."""
    parser = argparse.ArgumentParser(prog="python -m loadtest.autoscaler_latency", description=__doc__)
    parser.add_argument("--actors", type=positive_int, default=40, help="actors to submit (default: 40)")
    parser.add_argument("--interval", type=float, default=1.0, help="CORRAL_AUTOSCALER_INTERVAL (default: 1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the pauses between submissions")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the measurement on an embedded mesh and print the figures."""
    options = build_parser().parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="corral-autoscaler-latency-") as data:
        config = Path(data) / "autoscaler.yaml"
        config.write_text(NODE_TYPES, encoding="utf-8")
        settings = {"CORRAL_AUTOSCALER_CONFIG": str(config), "CORRAL_AUTOSCALER_INTERVAL": str(options.interval)}
        mesh = start_mesh(Path(data) / "mesh", services=(*SERVICES, AUTOSCALER), settings=settings)
        try:
            delays = asyncio.run(drive(mesh, options.actors, options.interval, options.seed))
        finally:
            mesh.stop()
    figures = report(delays, options.actors, options.interval)
    if options.json:
        print(json.dumps(figures))
    else:
        print(
            f"pending actor -> launch request, {figures['measured']} of {figures['actors']} actors: "
            f"p50 {figures['p50_ms']:.1f} ms, p95 {figures['p95_ms']:.1f} ms, max {figures['max_ms']:.1f} ms "
            f"(target <= {figures['target_ms']:.0f} ms: one interval of {figures['interval_ms']:.0f} ms + 100 ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
