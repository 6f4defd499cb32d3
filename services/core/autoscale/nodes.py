"""What a launched node of a type looks like: its registration event and the node the planner imagines (pure)."""

from __future__ import annotations

from schemas import NodeRegistered, Taint
from services.core.autoscale.config import NodeType
from services.core.labels import LAUNCH_ID, NODE_ID, NODE_TYPE
from services.core.prng import stable_hash
from services.core.request import rare_taint_key
from services.core.state import NodeState
from services.core.state.model import node_footprint


def launched_labels(node_type: NodeType, node_id: str, launch_id: str) -> dict[str, str]:
    """The labels a node of `node_type` registers with: the type's, its id, its type and its launch."""
    return {**node_type.labels, NODE_ID: node_id, NODE_TYPE: node_type.name, LAUNCH_ID: launch_id}


def launched_taints(node_type: NodeType, rare_resources: tuple[str, ...]) -> list[Taint]:
    """The type's taints plus the automatic taint of each rare resource it holds (as registration adds them)."""
    rare = [Taint(rare_taint_key(name), "true") for name in rare_resources if node_type.resources.get(name, 0.0) > 0]
    return [*node_type.taints, *rare]


def launched_node(
    node_type: NodeType, node_id: str, launch_id: str, rare_resources: tuple[str, ...] = ()
) -> NodeRegistered:
    """The registration of a launched node as the log holds it (rare-resource taints added, as registration does)."""
    return NodeRegistered(
        node_id=node_id,
        resources=dict(node_type.resources),
        labels=launched_labels(node_type, node_id, launch_id),
        taints=launched_taints(node_type, rare_resources),
    )


def imagined_node(node_type: NodeType, node_id: str, rare_resources: tuple[str, ...], seed: int = 0) -> NodeState:
    """An empty node of `node_type` as the view would hold it once registered (rare-resource taints included)."""
    node = NodeState(node_id, stable_hash(seed, node_id), node_type.resources, launched_labels(node_type, node_id, ""))
    node.set_taints(launched_taints(node_type, rare_resources))
    node.footprint = node_footprint(node)
    return node
