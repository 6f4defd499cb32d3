"""The cluster `corral bench pending` builds, in the core or through a mesh: batch nodes held full by one placement
group, tainted service nodes, the waiting actors and the unrelated requests."""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas import PlacementGroupRequest, ScheduleRequest, Taint

SERVICE = Taint("service", "true")
BLOCKER = "blocker"
BATCH_NODE = {"CPU": 32.0}
SERVICE_NODE = {"CPU": 16.0, "memory": 64.0}
KEPT = 10
"""Unrelated actors alive at once: each request removes the one submitted this many requests earlier."""


def waiting_request(index: int, shapes: int) -> ScheduleRequest:
    """One of the waiting actors: 1 CPU, and 1 to `shapes` GiB of memory."""
    return ScheduleRequest(f"wait-{index:06d}", {"CPU": 1.0, "memory": float(1 + index % shapes)})


def unrelated_request(index: int) -> ScheduleRequest:
    """One of the unrelated requests: 1 CPU on the service nodes, whose taint it tolerates."""
    return ScheduleRequest(
        f"unrelated-{index:06d}", {"CPU": 1.0}, label_selector={"pool": "s"}, tolerations={"service": "true"}
    )


def batch_nodes(nodes: int) -> list[str]:
    """The batch nodes' ids."""
    return [f"batch-{index:05d}" for index in range(nodes)]


def service_nodes(nodes: int) -> list[str]:
    """The service nodes' ids (a tenth as many as batch nodes, at least one)."""
    return [f"service-{index:04d}" for index in range(max(1, nodes // 10))]


def blocker(nodes: int) -> PlacementGroupRequest:
    """The placement group that holds every batch node full."""
    return PlacementGroupRequest(BLOCKER, [BATCH_NODE] * nodes, "SPREAD")


@dataclass(frozen=True)
class Measured:
    """What one run measured: the drain, and each unrelated request's nanoseconds before, during and after it."""

    drain_s: float
    still_pending: int
    before: list[int]
    after: list[int]
    during: list[int] = field(default_factory=list)
    drain_cpu_s: float | None = None
    """The drain's CPU seconds (in this process: only when it runs on the core here)."""
