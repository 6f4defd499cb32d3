"""Scheduling requests: actors and tasks, placement groups, and the strategies they carry (the proposals' API)."""

from __future__ import annotations

import enum
from typing import Annotated, Literal, TypedDict

import msgspec

from schemas.selectors import SelectorSpec

NODE_ID_LABEL = "corral.io/node-id"
HOSTNAME_LABEL = "corral.io/hostname"

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
PlacementStrategy = Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"]
RunAfterPolicy = Literal["", "Require", "Prefer"]

Amount = Annotated[float, msgspec.Meta(ge=0)]
"""An amount of a resource: a finite number >= 0 (JSON has no NaN or infinity; a number past a float's range is
refused)."""
Amounts = dict[str, Amount]
"""Resource names and amounts: `{"CPU": 4, "GPU": 1}`."""
AtLeastMinusOne = Annotated[int, msgspec.Meta(ge=-1)]
"""A count or index where -1 means "any" or "forever"."""


class Taint(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A node taint: work that does not tolerate `key` (with this value) keeps off the node, per `effect`."""

    key: str
    value: str = ""
    effect: TaintEffect = "NoSchedule"


class ActorAffinityOperator(enum.StrEnum):
    """How an actor-affinity expression matches the labels of actors already placed."""

    IN = "IN"
    NOT_IN = "NOT_IN"
    EXISTS = "EXISTS"
    DOES_NOT_EXIST = "DOES_NOT_EXIST"


class ActorAffinityMatchExpression(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Be with (IN, EXISTS) or away from (NOT_IN, DOES_NOT_EXIST) actors whose labels match, per topology domain."""

    key: str
    operator: ActorAffinityOperator
    values: list[str] = []
    soft: bool = False
    topology_key: str = NODE_ID_LABEL


class ActorAffinitySchedulingStrategy(msgspec.Struct, frozen=True, tag="actor_affinity", forbid_unknown_fields=True):
    """Actor affinity and anti-affinity; expressions are ANDed, or ORed with `is_or_semantics`."""

    match_expressions: list[ActorAffinityMatchExpression]
    is_or_semantics: bool = False


class NodeLabelSchedulingStrategy(msgspec.Struct, frozen=True, tag="node_label", forbid_unknown_fields=True):
    """Node labels: `hard` filters nodes, `soft` prefers them (and is ignored when nothing matches)."""

    hard: SelectorSpec = {}
    soft: SelectorSpec = {}


class NodeAffinitySchedulingStrategy(msgspec.Struct, frozen=True, tag="node_affinity", forbid_unknown_fields=True):
    """Run on `node_id`: hard means that node or pending, soft means prefer it."""

    node_id: str
    soft: bool = False


class PlacementGroupSchedulingStrategy(msgspec.Struct, frozen=True, tag="placement_group", forbid_unknown_fields=True):
    """Run inside a placement group's bundle (`bundle_index=-1`: any bundle with room)."""

    placement_group_id: str
    bundle_index: AtLeastMinusOne = -1


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

    name: str
    weight: Annotated[int, msgspec.Meta(ge=0)] = 100


class RunAfter(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """DataFlow affinity inheritance: run after `operation_id`, near where it was placed (proposal 003)."""

    operation_id: str
    policy: RunAfterPolicy = ""
    require: list[str] = []
    prefer: list[Prefer] = []


class FallbackOption(TypedDict):
    """One `fallback_strategy` option of an actor or task."""

    label_selector: SelectorSpec


class BundleFallbackOption(TypedDict, total=False):
    """One `fallback_strategy` option of a placement group."""

    bundles: list[Amounts]
    bundle_label_selector: list[SelectorSpec]


class ScheduleRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Place one actor or task."""

    actor_id: str
    resources: Amounts = {}
    namespace: str = "default"
    labels: dict[str, str] = {}
    label_selector: SelectorSpec = {}
    fallback_strategy: list[FallbackOption] = []
    scheduling_strategy: SchedulingStrategy = None
    tolerations: SelectorSpec = {}
    toleration_seconds: dict[str, float] = {}
    """Taint key -> how long (seconds) the work stays on a node once that taint turns NoExecute, as Kubernetes'
    `tolerationSeconds`; only `corral.io/unreachable` (a node declared dead) is timed, and the key must be tolerated."""
    run_after: RunAfter | None = None
    max_restarts: AtLeastMinusOne = 0
    priority: int = 0
    vcluster_id: str | None = None
    """The virtual cluster it runs in (None: the root cluster)."""


class PlacementGroupRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Reserve a gang of resource bundles, all or none."""

    pg_id: str
    bundles: list[Amounts]
    strategy: PlacementStrategy = "PACK"
    bundle_label_selector: list[SelectorSpec] = []
    tolerations: SelectorSpec = {}
    toleration_seconds: dict[str, float] = {}
    """As an actor's: how long its bundles stay on a node declared dead (`corral.io/unreachable`)."""
    fallback_strategy: list[BundleFallbackOption] = []
    priority: int = 0
    vcluster_id: str | None = None
    """The virtual cluster it reserves in (None: the root cluster)."""
