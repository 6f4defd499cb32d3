"""Virtual clusters (proposal 004): the spec, the virtual nodes reserved for it, and what callers read back."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from schemas.requests import Amounts
from schemas.selectors import SelectorSpec

VNodePolicy = Literal["PACK", "SPREAD", "STRICT_SPREAD"]
VClusterStatus = Literal["admitted", "queued", "degraded"]


class FixedSizeNode(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One fixed-size virtual node: its resources and the labels it adds to those of the parent node."""

    resources: Annotated[Amounts, Meta(description="Resource name -> amount the virtual node holds.")]
    labels: Annotated[dict[str, str], Meta(description="Labels added to those of the node it is carved from.")] = {}


class FixedSizeNodes(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A group of fixed-size virtual nodes placed PACK, SPREAD or STRICT_SPREAD over the parent's nodes."""

    nodes: Annotated[list[FixedSizeNode], Meta(description="The virtual nodes of this group.")]
    scheduling_policy: Annotated[
        VNodePolicy,
        Meta(description="PACK: few parent nodes; SPREAD: different ones, preferred; STRICT_SPREAD: one each."),
    ] = "PACK"


class VirtualCluster(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A partition of its parent: fixed-size nodes plus flexible resources between a minimum and a maximum.

    A resource missing from `flexible_resource_max` is unbounded when there are no fixed-size nodes, and equals
    its flexible minimum when there are (so a cluster of fixed-size nodes alone never grows). `tolerations`
    decide which tainted parent nodes virtual nodes may be carved from.
    """

    flexible_resource_min: Annotated[
        Amounts, Meta(description="Resource name -> amount reserved for the cluster beyond its fixed-size nodes.")
    ] = {}
    flexible_resource_max: Annotated[
        Amounts,
        Meta(
            description="Resource name -> the most flexible room it may grow to; a resource missing here is unbounded "
            "without fixed-size nodes, and equal to its minimum with them."
        ),
    ] = {}
    fixed_size_nodes: Annotated[
        list[FixedSizeNodes], Meta(description="Groups of fixed-size virtual nodes, each with its placement policy.")
    ] = []
    tolerations: Annotated[
        SelectorSpec, Meta(description="Taint key -> condition: the tainted parent nodes it may be carved from.")
    ] = {}


class VirtualNodeGrant(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One virtual node reserved out of `parent_node`: fixed-size (`slot` = its index in the spec) or flexible."""

    vnode_id: str
    parent_node: str
    resources: Amounts
    labels: dict[str, str] = {}
    slot: int = -1
    """Index of the fixed-size node in the spec (groups flattened in order); -1 for the flexible node."""


class Admitted(msgspec.Struct, frozen=True, tag_field="type", tag="admitted", forbid_unknown_fields=True):
    """The virtual cluster's minimum is reserved: these virtual nodes exist."""

    vc_id: str
    vnode_ids: list[str]


class Queued(msgspec.Struct, frozen=True, tag_field="type", tag="queued", forbid_unknown_fields=True):
    """The virtual cluster waits in its parent's admission queue (`position` 1 is the head)."""

    vc_id: str
    message: str
    position: int


class Destroyed(msgspec.Struct, frozen=True, tag_field="type", tag="destroyed", forbid_unknown_fields=True):
    """The virtual cluster (and its children) are gone; `stopped` lists the work that was stopped."""

    vc_id: str
    destroyed: list[str]
    stopped: list[str] = []


class VirtualNodeInfo(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One virtual node as its cluster sees it."""

    node_id: str
    node_labels: dict[str, str]
    total_resources: dict[str, float]
    used_resources: dict[str, float]
    available_resources: dict[str, float]
    parent_node: str
    flexible: bool = False


class VirtualClusterInfo(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A virtual cluster: its spec, state, resources, nodes and place in the tree (`parent` None is the root)."""

    spec: VirtualCluster
    cluster_id: str
    state: VClusterStatus
    total_resources: dict[str, float]
    max_resources: dict[str, float | None]
    """None: unbounded."""
    available_resources: dict[str, float]
    nodes: list[VirtualNodeInfo]
    children: list[str]
    parent: str | None
    priority: int = 0
    message: str = ""
    """Why it waits (queued) or what it lacks (degraded)."""


VClusterOutcome = Admitted | Queued
