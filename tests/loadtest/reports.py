"""A load test report built by hand, for tests of how it is judged and printed."""

from __future__ import annotations

from loadtest.autoscaled import AutoscalerFigures
from loadtest.report import Goal, Report


def report_of(
    targets: list[Goal], *, floor_share: float | None = None, autoscaler: AutoscalerFigures | None = None
) -> Report:
    """A report of a one-node, one-user run with no phases of its own: only `targets` (and the figures) to print."""
    return Report(
        nats_url="nats://127.0.0.1:1",
        embedded_mesh=True,
        replicas=1,
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
