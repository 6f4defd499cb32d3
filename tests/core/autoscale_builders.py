"""Builders for the autoscaler's planner tests: a configuration of node types, and running a plan on a cluster."""

from __future__ import annotations

from services.core import Cluster
from services.core.autoscale import Fleet, ScalePlan, ScalingConfig, parse_config, plan

RARE = ("GPU",)

TYPES = """
upscaling_speed: 1.0
node_types:
  cpu-4:
    resources: {CPU: 4}
    labels: {type: 4c8g, zone: usa-1}
    max_workers: 50
  cpu-16:
    resources: {CPU: 16}
    labels: {type: 16c32g, zone: usa-2}
    max_workers: 10
    cost: 3
  gpu-a100:
    resources: {CPU: 16, GPU: 4}
    labels: {accelerator-type: A100}
    taints: {gpu_node: "true"}
    max_workers: 8
    cost: 10
"""


SPARE = """
  spare:
    resources: {CPU: 1}
    taints: {never: "x"}
    max_workers: 1000
    cost: 1000
"""
"""A type no work tolerates: as many running `spare` nodes as a test likes raise the round's upscaling budget."""


def config(text: str = TYPES) -> ScalingConfig:
    """The test node types: cpu-4 (cost 1), cpu-16 (cost 3, max 10), gpu-a100 (tainted gpu_node, cost 10, max 8)."""
    return parse_config(text)


def cluster() -> Cluster:
    """An empty cluster that isolates GPUs as a rare resource."""
    return Cluster(rare_resources=RARE)


def plan_for(target: Cluster, scaling: ScalingConfig | None = None, fleet: Fleet | None = None) -> ScalePlan:
    """The plan for the cluster's pending work."""
    return plan(target.view, scaling or config(), fleet or Fleet(), RARE)


def launched(result: ScalePlan) -> dict[str, int]:
    """Node type -> how many nodes the plan launches."""
    return {launch.node_type: launch.count for launch in result.launches}
