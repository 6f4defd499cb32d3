"""Load test reports and phases built by hand, for tests of how they are judged and printed."""

from __future__ import annotations

from loadtest.autoscaled import AutoscalerFigures
from loadtest.costs import costs_of
from loadtest.report import Goal, Phase, Report
from loadtest.stats import Latency


def report_of(
    targets: list[Goal], *, floor_share: float | None = None, autoscaler: AutoscalerFigures | None = None
) -> Report:
    """A report of a one-node, one-user run with no phases of its own: only `targets` (and the figures) to print."""
    return Report(
        nats_url="nats://127.0.0.1:1",
        embedded_mesh=True,
        replicas=1,
        core="source",
        nodes=1,
        users=1,
        connections=1,
        hold=1,
        registration_s=0.0,
        phases={},
        floor_share=floor_share,
        targets=targets,
        tenants=None,
        autoscaler=autoscaler,
    )


def phase(name: str, placements_per_s: float, *, p99: float = 10.0, mode: str = "closed") -> Phase:
    """A phase with just the figures the targets read."""
    latency = Latency(p50=1.0, p95=2.0, p99=p99, max=p99, mean=1.0)
    return Phase(
        name=name,
        target="corral",
        description="",
        mode=mode,
        users=1,
        batch=1,
        rate_target=placements_per_s if mode == "open" else 0.0,
        seconds=1.0,
        requests=int(placements_per_s),
        placements=int(placements_per_s),
        pending=0,
        errors=0,
        removes=0,
        placements_per_s=placements_per_s,
        decisions_per_s=placements_per_s,
        requests_per_s=placements_per_s,
        latency_ms=latency,
        rows=[],
        cpu={},
        costs=costs_of({}, placements_per_s, placements_per_s),
        dropped=0,
        lag_p99_ms=0.0,
        lag_max_ms=0.0,
        unfinished=0,
        first_error="",
        decider=None,
    )
