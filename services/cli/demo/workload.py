"""The demo scenario: twelve nodes in three zones and a workload that uses every placement rule."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from schemas import (
    ActorAffinityMatchExpression,
    ActorAffinityOperator,
    ActorAffinitySchedulingStrategy,
    Exists,
    In,
    NodeAffinitySchedulingStrategy,
    NodeLabelSchedulingStrategy,
    NotIn,
    PlacementGroupRequest,
    PlacementGroupSchedulingStrategy,
    Prefer,
    RunAfter,
    ScheduleRequest,
    SelectorSpec,
    Taint,
)
from services.core import Cluster
from services.core.labels import ACCELERATOR_TYPE, MARKET_TYPE, ZONE

SEED = 7
RARE_RESOURCES = ("GPU",)
GPU_TAINT = Taint("gpu_node", "true")
ZONES = {"z1": "us-east", "z2": "us-east", "z3": "us-west"}

# node id, zone, user labels, market type, taints (the GPU nodes are added with GPUs and the gpu_node taint)
CPU_NODES: list[tuple[str, str, dict[str, str], str, list[Taint]]] = [
    ("cpu-1a", "z1", {"tier": "web", "rack": "r1", "nvme": "yes"}, "on-demand", []),
    ("cpu-1b", "z1", {"tier": "web", "rack": "r1"}, "spot", []),
    ("cpu-1c", "z1", {"tier": "batch", "rack": "r2", "nvme": "yes"}, "on-demand", []),
    ("cpu-2a", "z2", {"tier": "web", "rack": "r3", "nvme": "yes"}, "on-demand", []),
    ("cpu-2b", "z2", {"tier": "batch", "rack": "r4", "nvme": "yes"}, "spot", []),
    ("cpu-2c", "z2", {"tier": "batch", "rack": "r4"}, "on-demand", [Taint("maintenance", "soon", "PreferNoSchedule")]),
    ("cpu-3a", "z3", {"tier": "web", "rack": "r5"}, "on-demand", []),
    ("cpu-3b", "z3", {"tier": "db", "rack": "r6", "nvme": "yes"}, "on-demand", [Taint("dedicated", "db")]),
    ("cpu-3c", "z3", {"tier": "batch", "rack": "r6"}, "spot", [Taint("quarantine", "true")]),
]
GPU_NODES: list[tuple[str, str, str, str]] = [
    ("gpu-1", "z1", "A100", "on-demand"),
    ("gpu-2", "z2", "L4", "spot"),
    ("gpu-3", "z3", "A100", "on-demand"),
]


class NodeAdder(Protocol):
    """Anything that registers nodes like `Cluster.add_node` (the in-process cluster, or the mesh's client)."""

    def add_node(
        self,
        node_id: str,
        resources: dict[str, float],
        labels: dict[str, str] | None = ...,
        taints: dict[str, str] | list[Taint] | None = ...,
        *,
        address: str = ...,
        **defaults: str | None,
    ) -> object:
        """Register one node."""


def build_cluster() -> Cluster:
    """The demo's nodes in an in-process cluster."""
    cluster = Cluster(seed=SEED, rare_resources=RARE_RESOURCES)
    add_nodes(cluster)
    return cluster


def add_nodes(cluster: NodeAdder) -> None:
    """Twelve nodes in three zones; GPU nodes tainted (`gpu_node` and, automatically, the rare-resource taint)."""
    for node_id, zone, labels, market, taints in CPU_NODES:
        cluster.add_node(
            node_id,
            {"CPU": 8, "memory": 32},
            labels,
            taints,
            hostname=f"host-{node_id}",
            zone=zone,
            region=ZONES[zone],
            market_type=market,
            node_group="cpu-pool",
        )
    for node_id, zone, accelerator, market in GPU_NODES:
        cluster.add_node(
            node_id,
            {"CPU": 16, "GPU": 4, "memory": 64},
            {"tier": "ml", "nvme": "yes"},
            [GPU_TAINT],
            hostname=f"host-{node_id}",
            zone=zone,
            region=ZONES[zone],
            accelerator_type=accelerator,
            market_type=market,
            node_group="gpu-pool",
        )


def affinity(
    operator: str, app: str | None, *, topology: str = "corral.io/node-id", soft: bool = False
) -> ActorAffinitySchedulingStrategy:
    """One actor-affinity expression on the `app` label."""
    values = [app] if app is not None else []
    expression = ActorAffinityMatchExpression("app", ActorAffinityOperator(operator), values, soft, topology)
    return ActorAffinitySchedulingStrategy([expression])


@dataclass(frozen=True)
class Step:
    """One piece of the demo workload and, in a few words, the rule that decides where it goes."""

    request: ScheduleRequest | PlacementGroupRequest
    why: str


def actor(actor_id: str, why: str, cpu: float = 1, **fields: Any) -> Step:
    """An actor labelled `app=<its id without a replica number>`, so the exclusive actor keeps everyone out."""
    labels = {"app": actor_id.rstrip("-0123456789")}
    return Step(ScheduleRequest(actor_id, {"CPU": cpu}, labels=labels, **fields), why)


def workload() -> list[Step]:
    """Every rule of the proposals, in the order the demo submits them."""
    bundle_zones: list[SelectorSpec] = [{ZONE: zone} for zone in ZONES]
    return [
        Step(PlacementGroupRequest("pg-pack", [{"CPU": 2}, {"CPU": 2}], "PACK"), "PACK: both bundles on one node"),
        actor(
            "pg-worker",
            "inside pg-pack, bundle 0",
            scheduling_strategy=PlacementGroupSchedulingStrategy("pg-pack", 0),
        ),
        *(actor(f"spread-{i}", "SPREAD: least utilised node", scheduling_strategy="SPREAD") for i in (1, 2, 3)),
        Step(
            PlacementGroupRequest("pg-zones", [{"CPU": 1}] * 3, "STRICT_SPREAD", bundle_label_selector=bundle_zones),
            "STRICT_SPREAD, bundle i in zone z<i+1>",
        ),
        Step(PlacementGroupRequest("pg-too-wide", [{"CPU": 1}] * 10, "STRICT_SPREAD"), "10 distinct nodes: too few"),
        *(
            actor(
                f"web-{i}",
                "tier=web, anti-affinity NOT_IN app=web",
                max_restarts=1,
                label_selector={"tier": "web"},
                scheduling_strategy=affinity("NOT_IN", "web"),
            )
            for i in (1, 2, 3)
        ),
        actor(
            "frontend",
            "selector tier=in(web,batch), market=!spot",
            label_selector={"tier": "in(web,batch)", MARKET_TYPE: "!spot"},
        ),
        actor(
            "etl",
            "In(batch), NotIn(r2), Exists(nvme)",
            label_selector={"tier": In("batch"), "rack": NotIn("r2"), "nvme": Exists()},
        ),
        actor("etl-step2", "RunAfter etl, Require: same host", run_after=RunAfter("etl", "Require")),
        actor(
            "etl-report",
            "RunAfter etl, Prefer zone (weight 50)",
            label_selector={"tier": "!batch"},
            run_after=RunAfter("etl", "Prefer", prefer=[Prefer(ZONE, 50)]),
        ),
        actor(
            "cache",
            "fallback: no H100, so on-demand + nvme",
            max_restarts=2,
            label_selector={ACCELERATOR_TYPE: "H100"},
            fallback_strategy=[{"label_selector": {MARKET_TYPE: "on-demand", "nvme": "yes", "tier": "!ml"}}],
        ),
        actor(
            "cache-sidecar",
            "affinity IN app=cache (same node)",
            max_restarts=2,
            scheduling_strategy=affinity("IN", "cache"),
        ),
        actor("db", "tolerates dedicated=db, tier=db", tolerations={"dedicated": "db"}, label_selector={"tier": "db"}),
        actor("db-client", "affinity IN app=db (same zone)", scheduling_strategy=affinity("IN", "db", topology=ZONE)),
        Step(
            ScheduleRequest(
                "trainer",
                {"CPU": 4, "GPU": 1},
                labels={"app": "trainer"},
                label_selector={ACCELERATOR_TYPE: "A100"},
                tolerations={"gpu_node": "true"},
            ),
            "GPU A100; tolerates gpu_node (+ rare taint)",
        ),
        actor(
            "no-gpu-on-ml",
            "tolerates gpu_node, but asks no GPU",
            tolerations={"gpu_node": Exists()},
            scheduling_strategy=NodeLabelSchedulingStrategy(hard={"tier": "ml"}),
        ),
        actor(
            "analytics",
            "NodeLabel hard zone in(z2,z3), soft nvme",
            scheduling_strategy=NodeLabelSchedulingStrategy(hard={ZONE: "in(z2,z3)"}, soft={"nvme": "yes"}),
        ),
        actor("pinned", "NodeAffinity hard cpu-1b", scheduling_strategy=NodeAffinitySchedulingStrategy("cpu-1b")),
        actor(
            "sticky",
            "NodeAffinity soft cpu-3a",
            scheduling_strategy=NodeAffinitySchedulingStrategy("cpu-3a", soft=True),
        ),
        actor("reporter", "rack=r4; avoids PreferNoSchedule cpu-2c", label_selector={"rack": "r4"}),
        actor(
            "exclusive",
            "DOES_NOT_EXIST app: a node of its own",
            label_selector={"tier": "batch"},
            scheduling_strategy=affinity("DOES_NOT_EXIST", None),
        ),
        actor(
            "batch-low",
            "pinned to cpu-3c (quarantined), priority 0",
            cpu=6,
            scheduling_strategy=NodeAffinitySchedulingStrategy("cpu-3c"),
        ),
        actor(
            "batch-high",
            "pinned to cpu-3c (quarantined), priority 10",
            cpu=6,
            priority=10,
            scheduling_strategy=NodeAffinitySchedulingStrategy("cpu-3c"),
        ),
        actor("batch-report", "RunAfter batch-high, Require: same host", run_after=RunAfter("batch-high", "Require")),
    ]
