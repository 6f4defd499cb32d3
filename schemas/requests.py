"""Scheduling requests: actors and tasks, placement groups, and the strategies they carry (the proposals' API)."""

from __future__ import annotations

import enum
from typing import Annotated, Literal, TypedDict

import msgspec
from msgspec import Meta

from schemas.selectors import SelectorSpec

NODE_ID_LABEL = "corral.io/node-id"
HOSTNAME_LABEL = "corral.io/hostname"

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
PlacementStrategy = Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"]
RunAfterPolicy = Literal["", "Require", "Prefer"]

Amount = Annotated[float, Meta(ge=0)]
"""An amount of a resource: a finite number >= 0 (JSON has no NaN or infinity; a number past a float's range is
refused)."""
Amounts = dict[str, Amount]
"""Resource names and amounts: `{"CPU": 4, "GPU": 1}`."""
AtLeastMinusOne = Annotated[int, Meta(ge=-1)]
"""A count or index where -1 means "any" or "forever"."""

RESOURCES = "Resource name -> amount it needs (`CPU`, `GPU`, `memory` in bytes, any custom resource)."
TOLERATIONS = "Taint key -> condition on the taint's value: the taints it may run under (`exists()`: any value)."
TOLERATION_SECONDS = (
    "Taint key -> seconds it stays on a node once that taint turns NoExecute, as Kubernetes' tolerationSeconds; "
    "only corral.io/unreachable (a node declared dead) is timed, and the key must be tolerated."
)
PRIORITY = "Higher goes first among waiting work (then arrival)."


class Taint(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A node taint: work that does not tolerate `key` (with this value) keeps off the node, per `effect`."""

    key: Annotated[str, Meta(description="The taint's key, as a label key.")]
    value: Annotated[str, Meta(description="The taint's value (may be empty).")] = ""
    effect: Annotated[
        TaintEffect,
        Meta(description="NoSchedule: no new work; PreferNoSchedule: avoided; NoExecute: running work leaves too."),
    ] = "NoSchedule"


class ActorAffinityOperator(enum.StrEnum):
    """How an actor-affinity expression matches the labels of actors already placed."""

    IN = "IN"
    NOT_IN = "NOT_IN"
    EXISTS = "EXISTS"
    DOES_NOT_EXIST = "DOES_NOT_EXIST"


class ActorAffinityMatchExpression(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Be with (IN, EXISTS) or away from (NOT_IN, DOES_NOT_EXIST) actors whose labels match, per topology domain."""

    key: Annotated[str, Meta(description="The label key of the actors already placed that this expression reads.")]
    operator: Annotated[
        ActorAffinityOperator,
        Meta(description="IN or EXISTS: be with matching actors; NOT_IN or DOES_NOT_EXIST: keep away from them."),
    ]
    values: Annotated[list[str], Meta(description="The label values IN and NOT_IN match (unused otherwise).")] = []
    soft: Annotated[
        bool, Meta(description="True: a preference that scores nodes; false: a rule that filters them.")
    ] = False
    topology_key: Annotated[
        str,
        Meta(description="The node label whose equal values form one domain (default: each node on its own)."),
    ] = NODE_ID_LABEL


class ActorAffinitySchedulingStrategy(msgspec.Struct, frozen=True, tag="actor_affinity", forbid_unknown_fields=True):
    """Actor affinity and anti-affinity; expressions are ANDed, or ORed with `is_or_semantics`."""

    match_expressions: Annotated[
        list[ActorAffinityMatchExpression], Meta(description="The conditions on the actors already placed.")
    ]
    is_or_semantics: Annotated[bool, Meta(description="True: any expression may hold; false: all must.")] = False


class NodeLabelSchedulingStrategy(msgspec.Struct, frozen=True, tag="node_label", forbid_unknown_fields=True):
    """Node labels: `hard` filters nodes, `soft` prefers them (and is ignored when nothing matches)."""

    hard: Annotated[SelectorSpec, Meta(description="Node label key -> condition every chosen node must meet.")] = {}
    soft: Annotated[
        SelectorSpec, Meta(description="Node label key -> condition preferred when some node meets it.")
    ] = {}


class NodeAffinitySchedulingStrategy(msgspec.Struct, frozen=True, tag="node_affinity", forbid_unknown_fields=True):
    """Run on `node_id`: hard means that node or pending, soft means prefer it."""

    node_id: Annotated[str, Meta(description="The node to run on.")]
    soft: Annotated[bool, Meta(description="True: prefer that node; false: that node or wait.")] = False


class PlacementGroupSchedulingStrategy(msgspec.Struct, frozen=True, tag="placement_group", forbid_unknown_fields=True):
    """Run inside a placement group's bundle (`bundle_index=-1`: any bundle with room)."""

    placement_group_id: Annotated[str, Meta(description="The placement group whose reserved room it runs in.")]
    bundle_index: Annotated[AtLeastMinusOne, Meta(description="The bundle (from 0); -1: any bundle with room.")] = -1


SchedulingStrategy = (
    str
    | ActorAffinitySchedulingStrategy
    | NodeLabelSchedulingStrategy
    | NodeAffinitySchedulingStrategy
    | PlacementGroupSchedulingStrategy
    | None
)
"""None, "DEFAULT", "SPREAD", or one of the strategy Structs."""


class Prefer(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A DataFlow preference: the node label `name` equal to the earlier operation's adds `weight`."""

    name: Annotated[str, Meta(description="A node label key; nodes with the earlier operation's value score.")]
    weight: Annotated[int, Meta(ge=0, description="How much a node with that value scores (>= 0).")] = 100


class RunAfter(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """DataFlow affinity inheritance: run after `operation_id`, near where it was placed (proposal 003)."""

    operation_id: Annotated[str, Meta(description="The actor or task whose placement this one follows.")]
    policy: Annotated[
        RunAfterPolicy,
        Meta(
            description="Require: only nodes like the earlier one's (wait until it is placed); Prefer: score them; "
            "empty: ignore run_after."
        ),
    ] = ""
    require: Annotated[
        list[str],
        Meta(
            description="With Require: node label keys whose values must equal the earlier node's (default: its "
            "hostname)."
        ),
    ] = []
    prefer: Annotated[
        list[Prefer], Meta(description="With Prefer: the weighted label keys (default: its hostname, weight 100).")
    ] = []


class FallbackOption(TypedDict):
    """One `fallback_strategy` option of an actor or task."""

    label_selector: Annotated[SelectorSpec, Meta(description="Node label key -> condition, tried in this option.")]


class BundleFallbackOption(TypedDict, total=False):
    """One `fallback_strategy` option of a placement group."""

    bundles: Annotated[list[Amounts], Meta(description="The bundles this option reserves instead (default: the same).")]
    bundle_label_selector: Annotated[
        list[SelectorSpec], Meta(description="One node label selector per bundle for this option (empty: any node).")
    ]


class ScheduleRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Place one actor or task."""

    actor_id: Annotated[str, Meta(description="The actor's or task's id, unique in the cluster.")]
    resources: Annotated[Amounts, Meta(description=RESOURCES)] = {}
    namespace: Annotated[str, Meta(description="Actor affinity matches only actors of the same namespace.")] = "default"
    labels: Annotated[
        dict[str, str], Meta(description="The actor's own labels, which other actors' actor affinity matches.")
    ] = {}
    label_selector: Annotated[
        SelectorSpec, Meta(description="Node label key -> condition (`ssd`, `in(a,b)`, `!a`, `exists()`, ...).")
    ] = {}
    fallback_strategy: Annotated[
        list[FallbackOption], Meta(description="Selectors tried in order when label_selector matches no node.")
    ] = []
    scheduling_strategy: Annotated[
        SchedulingStrategy,
        Meta(
            description="null or DEFAULT: the default policy; SPREAD: spread over the nodes; or a strategy object "
            "chosen by its `type` (actor_affinity, node_label, node_affinity, placement_group)."
        ),
    ] = None
    tolerations: Annotated[SelectorSpec, Meta(description=TOLERATIONS)] = {}
    toleration_seconds: Annotated[dict[str, float], Meta(description=TOLERATION_SECONDS)] = {}
    run_after: Annotated[
        RunAfter | None, Meta(description="DataFlow: place it after, and near, an earlier actor or task.")
    ] = None
    max_restarts: Annotated[
        AtLeastMinusOne, Meta(description="How often it restarts after a failure; -1: without end.")
    ] = 0
    priority: Annotated[int, Meta(description=PRIORITY)] = 0
    vcluster_id: Annotated[str | None, Meta(description="The virtual cluster it runs in (null: the root cluster).")] = (
        None
    )


class PlacementGroupRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Reserve a gang of resource bundles, all or none."""

    pg_id: Annotated[str, Meta(description="The placement group's id, unique in the cluster.")]
    bundles: Annotated[list[Amounts], Meta(description="The bundles, each a map of resource name -> amount.")]
    strategy: Annotated[
        PlacementStrategy,
        Meta(
            description="PACK: few nodes, preferred; SPREAD: different nodes, preferred; STRICT_PACK: one node; "
            "STRICT_SPREAD: each bundle on its own node."
        ),
    ] = "PACK"
    bundle_label_selector: Annotated[
        list[SelectorSpec], Meta(description="One node label selector per bundle (empty: any node).")
    ] = []
    tolerations: Annotated[SelectorSpec, Meta(description=TOLERATIONS)] = {}
    toleration_seconds: Annotated[dict[str, float], Meta(description=TOLERATION_SECONDS)] = {}
    fallback_strategy: Annotated[
        list[BundleFallbackOption], Meta(description="Options tried in order when the bundles cannot be placed.")
    ] = []
    priority: Annotated[int, Meta(description=PRIORITY)] = 0
    vcluster_id: Annotated[
        str | None, Meta(description="The virtual cluster it reserves in (null: the root cluster).")
    ] = None
