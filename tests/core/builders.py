"""Builders that keep the core tests short: clusters, requests, affinity strategies."""

from __future__ import annotations

from typing import Any

import pytest

from schemas import (
    NODE_ID_LABEL,
    ActorAffinityMatchExpression,
    ActorAffinityOperator,
    ActorAffinitySchedulingStrategy,
    ScheduleRequest,
)
from services import CORE_BUILD
from services.core import Cluster, Pending, Placed

WRONG_TYPES_IN_PYTHON_ONLY = pytest.mark.skipif(
    CORE_BUILD == "compiled",
    reason="compiled, a request's field that holds another type than its schema's raises TypeError when read: only a "
    "Python caller can build one (the wire's typed decoding refuses it naming the field)",
)
"""For the tests that hand the core a request whose fields break their own types."""


def make_cluster(nodes: int = 3, cpu: float = 4, *, zones: int = 3, seed: int = 0, **kwargs: Any) -> Cluster:
    """A cluster of `nodes` identical nodes n0..n{k}, spread round-robin over zones z0..z{zones-1}."""
    cluster = Cluster(seed=seed, **kwargs)
    for index in range(nodes):
        cluster.add_node(f"n{index}", {"CPU": cpu}, zone=f"z{index % zones}", hostname=f"h{index}")
    return cluster


SIX_NODES = frozenset({"n0", "n1", "n2", "n3", "n4", "n5"})
ZONE_OF_N2 = frozenset({"n2", "n5"})


def six_nodes(seed: int = 0) -> Cluster:
    """n0..n5 with 8 CPUs each, hostnames h0..h5, in zones z0 {n0, n3}, z1 {n1, n4} and z2 {n2, n5}."""
    return make_cluster(6, cpu=8, seed=seed)


def make_actor(actor_id: str, cpu: float = 1, **kwargs: Any) -> ScheduleRequest:
    """An actor asking for `cpu` CPUs, with any other request fields."""
    return ScheduleRequest(actor_id, {"CPU": cpu}, **kwargs)


def affinity(
    key: str,
    operator: str,
    values: list[str] | None = None,
    *,
    soft: bool = False,
    topology_key: str = NODE_ID_LABEL,
    is_or_semantics: bool = False,
) -> ActorAffinitySchedulingStrategy:
    """A strategy with one match expression."""
    expression = ActorAffinityMatchExpression(key, ActorAffinityOperator(operator), values or [], soft, topology_key)
    return ActorAffinitySchedulingStrategy([expression], is_or_semantics)


def on_node(node_id: str) -> dict[str, str]:
    """A label selector that pins a request to one node (through its `corral.io/node-id` label)."""
    return {NODE_ID_LABEL: node_id}


def expression(
    key: str,
    operator: str,
    values: list[str] | None = None,
    *,
    soft: bool = False,
    topology_key: str = NODE_ID_LABEL,
) -> ActorAffinityMatchExpression:
    """One actor-affinity match expression."""
    return ActorAffinityMatchExpression(key, ActorAffinityOperator(operator), values or [], soft, topology_key)


def node_of(decision: Placed | Pending) -> str:
    """The node a decision placed an actor on; fails the test with the explanation when it is pending."""
    assert isinstance(decision, Placed), f"expected a placement, got {decision}"
    assert decision.node_id is not None, f"expected an actor placement, got {decision}"
    return decision.node_id


def waiting(decision: Placed | Pending) -> Pending:
    """The explanation of a pending decision; fails the test when the work was placed."""
    assert isinstance(decision, Pending), f"expected the work to wait, got {decision}"
    return decision


def disks(seed: int = 0) -> Cluster:
    """n0, n1 with ssd disks and n2, n3 with hdd disks, 4 CPUs each."""
    cluster = Cluster(seed=seed)
    for index, disk in enumerate(["ssd", "ssd", "hdd", "hdd"]):
        cluster.add_node(f"n{index}", {"CPU": 4}, labels={"disk": disk})
    return cluster
