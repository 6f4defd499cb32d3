"""The core benchmark's clusters and workloads: node layout, services, placed actors as events, timed requests."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

from schemas import (
    HOSTNAME_LABEL,
    NODE_ID_LABEL,
    ActorAffinityMatchExpression,
    ActorAffinityOperator,
    ActorAffinitySchedulingStrategy,
    ActorPlaced,
    ActorSubmitted,
    AnyEvent,
    In,
    NodeRegistered,
    NotIn,
    PlacementGroupRequest,
    ScheduleRequest,
    SelectorSpec,
    Taint,
)
from services.core.labels import MARKET_TYPE, NODE_GROUP, REGION, ZONE

ACTORS_PER_NODE = 10
ACTORS_PER_SERVICE = 50
NODE_RESOURCES = {"CPU": 64.0, "memory": 256.0}
REQUEST = {"CPU": 1.0}
TAINT = Taint("dedicated", "batch")
Strategy = ActorAffinitySchedulingStrategy
Work = ScheduleRequest | PlacementGroupRequest


def percentile(sorted_values: list[int], fraction: float) -> int:
    """Nearest-rank percentile of an ascending list."""
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


class Layout:
    """The shape of a benchmark cluster: zones, services (each living in one zone) and tainted nodes."""

    def __init__(self, nodes: int) -> None:
        self.nodes = nodes
        self.zones = min(9, max(3, nodes // 1000))
        # A service's actors live in one zone; each service ends up with about ACTORS_PER_SERVICE actors on
        # distinct nodes (at least 10 services per zone, so a node's 10 actors belong to 10 services).
        self.per_zone = max(ACTORS_PER_NODE, nodes * ACTORS_PER_NODE // ACTORS_PER_SERVICE // self.zones)
        self.services = self.per_zone * self.zones
        self.app_labels = [{"app": f"svc-{s}"} for s in range(self.services)]

    def service(self, node: int, slot: int) -> int:
        """The service of the `slot`-th actor on node `node`: one of its zone's, all distinct on one node."""
        zone, rank = node % self.zones, node // self.zones
        return ((rank * ACTORS_PER_NODE + slot) % self.per_zone) * self.zones + zone

    def tainted(self, node: int) -> bool:
        """30% of the nodes, scattered over zones and racks."""
        return (node * 7) % 10 < 3

    def node_event(self, node: int, *, taints: bool) -> NodeRegistered:
        """The registration of node `node`, with user and system labels."""
        node_id, zone = f"node-{node:05d}", node % self.zones
        labels = {
            "tier": ("web", "batch", "db")[node % 3],
            "rack": f"rack-{(node // self.zones) % 40}",
            "disk": "hdd" if node % 4 == 0 else "ssd",
            "team": f"t{node % 5}",
            NODE_ID_LABEL: node_id,
            HOSTNAME_LABEL: f"host-{node:05d}",
            ZONE: f"zone-{zone}",
            REGION: f"region-{zone // 3}",
            MARKET_TYPE: "spot" if node % 5 == 0 else "on-demand",
            NODE_GROUP: f"group-{node % 8}",
        }
        node_taints = [TAINT] if taints and self.tainted(node) else []
        return NodeRegistered(node_id=node_id, resources=dict(NODE_RESOURCES), labels=labels, taints=node_taints)


def _expression(
    service: str, operator: ActorAffinityOperator, *, soft: bool = False, topology: str = NODE_ID_LABEL
) -> ActorAffinitySchedulingStrategy:
    return ActorAffinitySchedulingStrategy([ActorAffinityMatchExpression("app", operator, [service], soft, topology)])


@dataclass(frozen=True)
class Workload:
    """A benchmark workload: how placed actors look, whether nodes are tainted, and the timed requests."""

    name: str
    summary: str
    strategy: Callable[[str], Strategy] | None = None
    taints: bool = False

    def placed_request(self, layout: Layout, node: int, slot: int, strategies: list[Strategy]) -> ScheduleRequest:
        """The request of an actor already running on `node`."""
        service = layout.service(node, slot)
        strategy = strategies[service] if self.strategy is not None else None
        tolerations: SelectorSpec = {TAINT.key: TAINT.value} if self.taints and layout.tainted(node) else {}
        return ScheduleRequest(
            f"actor-{node:05d}-{slot}",
            REQUEST,
            labels=layout.app_labels[service],
            scheduling_strategy=strategy,
            tolerations=tolerations,
        )

    def decisions(self, layout: Layout, count: int, strategies: list[Strategy]) -> list[Work]:
        """The requests to time, built before the clock starts."""
        if self.name == "pg_strict_spread":
            return [PlacementGroupRequest(f"pg-{d}", [dict(REQUEST)] * 4, "STRICT_SPREAD") for d in range(count)]
        requests: list[Work] = []
        for d in range(count):
            service = (d * 7) % layout.services
            selector = SELECTORS[d % len(SELECTORS)] if self.name == "label_selector" else {}
            tolerations: SelectorSpec = {TAINT.key: TAINT.value} if self.taints and d % 2 == 0 else {}
            strategy = strategies[service] if self.strategy is not None else None
            requests.append(
                ScheduleRequest(
                    f"new-{d}",
                    REQUEST,
                    labels=layout.app_labels[service] if self.strategy is not None else {},
                    label_selector=selector,
                    scheduling_strategy=strategy,
                    tolerations=tolerations,
                )
            )
        return requests


SELECTORS: list[SelectorSpec] = [
    {"tier": "web"},
    {"tier": "in(web,batch)", "disk": "ssd"},
    {"team": In("t1", "t2"), MARKET_TYPE: "!spot"},
    {"disk": "ssd", "rack": NotIn("rack-1", "rack-2")},
    {ZONE: "zone-1", "tier": "!db"},
]

WORKLOADS = {
    w.name: w
    for w in (
        Workload("plain", "CPU only, no rules"),
        Workload("label_selector", "label selectors (string grammar and In/NotIn), index-driven"),
        Workload(
            "anti_affinity_node",
            "hard NOT_IN its own service on node-id (every placed actor too: symmetric)",
            strategy=lambda service: _expression(service, ActorAffinityOperator.NOT_IN),
        ),
        Workload(
            "affinity_zone",
            "hard IN its own service on availability-zone",
            strategy=lambda service: _expression(service, ActorAffinityOperator.IN, topology=ZONE),
        ),
        Workload(
            "soft_affinity",
            "soft IN its own service on node-id",
            strategy=lambda service: _expression(service, ActorAffinityOperator.IN, soft=True),
        ),
        Workload("taints", "30% of nodes tainted NoSchedule, half the requests tolerate", taints=True),
        Workload("pg_strict_spread", "placement groups of 4 bundles, STRICT_SPREAD"),
        # Its own run (services/cli/bench/vclusters.py), not `decisions`: admission, churn, decisions inside.
        Workload("vclusters", "virtual clusters: tenants admitted, queued and churned; decisions inside vs root"),
    )
}


def build_events(workload: Workload, layout: Layout, strategies: list[Strategy]) -> list[AnyEvent]:
    """Every node registered, then 10 actors per node submitted and placed (no decisions are made)."""
    events: list[AnyEvent] = [layout.node_event(node, taints=workload.taints) for node in range(layout.nodes)]
    for node in range(layout.nodes):
        node_id = f"node-{node:05d}"
        for slot in range(ACTORS_PER_NODE):
            request = workload.placed_request(layout, node, slot, strategies)
            events.append(ActorSubmitted(request=request))
            events.append(ActorPlaced(actor_id=request.actor_id, node_id=node_id))
    return events


class Figures(TypedDict):
    """What one case reports (one JSON line)."""

    workload: str
    nodes: int
    placed_before: int
    decisions_per_s: float
    p50_us: float
    p99_us: float
    peak_rss_mb: float
    replay_events_per_s: float
