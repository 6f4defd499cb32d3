"""What a cluster view holds: nodes, actors, placement groups (plain data, mutated only by the folds)."""

from __future__ import annotations

from typing import Final, Literal

from schemas import Explanation, OperatorLabels, OperatorTaints, PlacementGroupRequest, ScheduleRequest, Taint
from services.core.labels import HOSTNAME, REGION, ZONE

Resources = dict[str, float]
EPSILON: Final = 1e-9
CPU: Final = "CPU"
MEMORY: Final = "memory"
"""The resources a node also keeps as plain fields (see `NodeState`)."""
WorkStatus = Literal["pending", "placed"]
"""Where an actor or placement group stands."""
FOOTPRINT_TOPOLOGY: Final = (HOSTNAME, ZONE, REGION)
"""The node labels every footprint carries (see `NodeState.footprint`)."""


def take(free: Resources, amount: Resources) -> None:
    """Subtract `amount` from `free` in place."""
    for name, quantity in amount.items():
        room = free.get(name)  # no default: a compiled core boxes a default 0.0 at every call
        free[name] = (0.0 if room is None else room) - quantity


def give(free: Resources, amount: Resources) -> None:
    """Add `amount` back to `free` in place."""
    for name, quantity in amount.items():
        room = free.get(name)
        free[name] = (0.0 if room is None else room) + quantity


def difference(new: Resources, old: Resources) -> Resources:
    """`new - old` per resource, one missing on either side counting as 0 (loops: no set of names is built)."""
    delta: Resources = {}
    for name, amount in new.items():
        before = old.get(name)
        delta[name] = amount - (0.0 if before is None else before)
    for name, before in old.items():
        if name not in new:
            delta[name] = 0.0 - before
    return delta


def fits(free: Resources, amount: Resources) -> bool:
    """Whether `amount` fits in `free`."""
    for name, quantity in amount.items():
        if quantity > 0:
            room = free.get(name)
            if (0.0 if room is None else room) + EPSILON < quantity:
                return False
    return True


class Layers:
    """Where a registered node's labels and taints come from: its agent's declaration (replaced when it registers
    again) and an operator's edits on top (kept until an operator changes them, or removes the node)."""

    __slots__ = ("agent_labels", "agent_taints", "operator_labels", "operator_taints")

    def __init__(
        self,
        agent_labels: dict[str, str],
        agent_taints: list[Taint],
        operator_labels: OperatorLabels | None = None,
        operator_taints: OperatorTaints | None = None,
    ) -> None:
        self.agent_labels = dict(agent_labels)
        self.agent_taints = list(agent_taints)
        self.operator_labels = operator_labels or OperatorLabels()
        self.operator_taints = operator_taints or OperatorTaints()


class NodeState:
    """One live node: capacity, what is free, labels, taints, and what runs on it.

    `free` and `total` are read as dicts; CPU and memory are also kept as plain fields (`free_cpu`, `free_memory`,
    `total_cpu`, `total_memory`), which the decision's walk over candidate nodes reads instead (as kube-scheduler's
    `Resource` and Ray's predefined resources do): compiled, a field is a double inside the node, where a dict read
    is a lookup and a boxed float elsewhere in memory. Whatever changes `free` or `total` goes through `take`,
    `give`, `set_total` or `set_free`, or calls `note_resources` after, so that the fields stay true.
    """

    __slots__ = (
        "actors",
        "address",
        "blocking_taints",
        "bundles",
        "dead_for",
        "declared_taints",
        "footprint",
        "free",
        "free_cpu",
        "free_memory",
        "hash_key",
        "labels",
        "layers",
        "node_id",
        "plain",
        "prefer_taints",
        "removed_at",
        "taints",
        "total",
        "total_cpu",
        "total_memory",
        "unreachable",
        "unreachable_since",
    )

    def __init__(self, node_id: str, hash_key: int, total: Resources, labels: dict[str, str]) -> None:
        self.node_id = node_id
        self.address = ""
        self.hash_key = hash_key
        self.total = dict(total)
        self.free = dict(total)
        self.labels = dict(labels)
        self.taints: tuple[Taint, ...] = ()
        """Every taint in force: the declared ones, then the liveness taint (`unreachable`) while there is one."""
        self.declared_taints: tuple[Taint, ...] = ()
        """The taints its agent and operators declared (what taint commands edit)."""
        self.unreachable: Taint | None = None
        """`corral.io/unreachable` (NoSchedule, then NoExecute once declared dead) while heartbeats are missed."""
        self.unreachable_since: float | None = None
        """When it was last heard from, while unreachable (the labels service's clock, Unix seconds)."""
        self.dead_for: float | None = None
        """Seconds since it was declared dead, as of the last `NodeDeclaredDead` (None: not declared dead)."""
        self.blocking_taints: tuple[Taint, ...] = ()
        self.prefer_taints: tuple[Taint, ...] = ()
        self.actors: set[str] = set()
        self.bundles: set[tuple[str, int]] = set()
        self.footprint: dict[str, str] = {}
        """The topology labels a DataFlow operation placed here passes on to the operations that run after it."""
        self.layers: Layers | None = None
        """Where `labels` and `taints` come from (None: a virtual or imagined node, whose are given whole)."""
        self.removed_at: float | None = None
        """The log time an operator removed this (dead) node."""
        self.free_cpu = self.free_memory = self.total_cpu = self.total_memory = 0.0
        self.plain = False
        """Whether CPU and memory are all the node has (its `policy_key` then reads only the plain fields)."""
        self.note_resources()

    def note_resources(self) -> None:
        """Make the plain fields true to `free` and `total` again (a resource missing from them counts 0)."""
        total, free = self.total, self.free
        plain = True
        for name in total:  # a loop, not all() over a generator: no object per call
            if name not in (CPU, MEMORY):
                plain = False
        self.plain = plain
        amount = total.get(CPU)  # no defaults: a compiled core boxes a default 0.0 at every call
        self.total_cpu = 0.0 if amount is None else amount
        amount = total.get(MEMORY)
        self.total_memory = 0.0 if amount is None else amount
        amount = free.get(CPU)
        self.free_cpu = 0.0 if amount is None else amount
        amount = free.get(MEMORY)
        self.free_memory = 0.0 if amount is None else amount

    def take(self, amount: Resources) -> None:
        """Take `amount` from what is free here."""
        self._add_free(amount, -1.0)

    def give(self, amount: Resources) -> None:
        """Give `amount` back to what is free here."""
        self._add_free(amount, 1.0)

    def _add_free(self, amount: Resources, sign: float) -> None:
        """Add `sign` times `amount` to what is free, each plain field as its entry changes (the total, and so
        `plain`, stay as they are: no call of `note_resources`, which reads every entry again)."""
        free = self.free
        for name, quantity in amount.items():
            room = free.get(name)  # no default: a compiled core boxes a default 0.0 at every call
            left = (0.0 if room is None else room) + sign * quantity
            free[name] = left
            if name == CPU:
                self.free_cpu = left
            elif name == MEMORY:
                self.free_memory = left

    def set_total(self, total: Resources) -> None:
        """Make `total` the node's capacity (what is free is changed apart)."""
        self.total = total
        self.note_resources()

    def set_free(self, free: Resources) -> None:
        """Make `free` what is free here."""
        self.free = free
        self.note_resources()

    def set_taints(self, taints: list[Taint]) -> None:
        """Replace the declared taints; the liveness taint stays."""
        self.declared_taints = tuple(taints)
        self._split_taints()

    def set_unreachable(self, taint: Taint | None) -> None:
        """Set (or with None, clear) the liveness taint; the declared taints stay."""
        self.unreachable = taint
        self._split_taints()

    def _split_taints(self) -> None:
        taints = self.declared_taints if self.unreachable is None else (*self.declared_taints, self.unreachable)
        self.taints = taints
        self.blocking_taints = tuple(t for t in taints if t.effect != "PreferNoSchedule")
        self.prefer_taints = tuple(t for t in taints if t.effect == "PreferNoSchedule")

    def utilisation(self, extra: Resources | None = None) -> float:
        """Max over resources of used / total, counting `extra` as used too (the hot path of `policy_key` for a node
        with more than CPU and memory: loops and no defaults, no call back into Python per resource)."""
        free = self.free
        share = 0.0
        for name, total in self.total.items():
            if total <= 0:
                continue
            room = free.get(name)  # no defaults: a compiled core boxes a default 0.0 at every call
            used = total - (0.0 if room is None else room)
            if extra:
                more = extra.get(name)
                if more is not None:
                    used += more
            used /= total
            if used > share:  # noqa: PLR1730 - max() is a call per resource on the hot path
                share = used
        return share


class ActorState:
    """One actor or task known to the scheduler: placed or pending."""

    __slots__ = ("arrival", "bundle", "explanation", "node_id", "request", "restarts", "status")

    def __init__(self, request: ScheduleRequest, arrival: int) -> None:
        self.request = request
        self.arrival = arrival
        self.status: WorkStatus = "pending"
        self.node_id: str | None = None
        self.bundle: tuple[str, int] | None = None
        self.restarts = 0
        self.explanation: Explanation | None = None

    @property
    def restarts_left(self) -> bool:
        """Whether a failure restarts it (`max_restarts=-1` restarts forever)."""
        limit = self.request.max_restarts
        return limit < 0 or self.restarts < limit


class GroupState:
    """One placement group: its chosen option and, per bundle, the node holding it and what is free inside."""

    __slots__ = (
        "actors",
        "arrival",
        "bundle_free",
        "bundle_nodes",
        "bundles",
        "explanation",
        "option",
        "request",
        "status",
    )

    def __init__(self, request: PlacementGroupRequest, arrival: int) -> None:
        self.request = request
        self.arrival = arrival
        self.status: WorkStatus = "pending"
        self.option = 0
        self.bundles: list[Resources] = [dict(b) for b in request.bundles]
        self.bundle_nodes: list[str | None] = [None] * len(request.bundles)
        self.bundle_free: list[Resources] = [dict(b) for b in request.bundles]
        self.actors: set[str] = set()
        self.explanation: Explanation | None = None

    def option_bundles(self, option: int) -> list[Resources]:
        """The bundle shapes of option `option` (0 = primary, then the fallbacks)."""
        if option == 0:
            return [dict(b) for b in self.request.bundles]
        return [dict(b) for b in self.request.fallback_strategy[option - 1].get("bundles", self.request.bundles)]


def node_footprint(node: NodeState) -> dict[str, str]:
    """The footprint of `node`: its labels of `FOOTPRINT_TOPOLOGY`."""
    return {key: node.labels[key] for key in FOOTPRINT_TOPOLOGY if key in node.labels}


LaunchState = Literal["launching", "registered", "draining", "failed", "terminated", "gone"]
"""Where an autoscaler launch stands: requested, its node registered, tainted for scale-down, never registered in
time, terminated by the autoscaler, or its node died."""
ENDED_LAUNCH_STATES: Final = ("failed", "terminated", "gone")


class Launch:
    """One node the autoscaler asked for: type, when and why, for which work, and where it stands."""

    __slots__ = (
        "changed_at",
        "existing",
        "idle_since",
        "launch_id",
        "node_id",
        "node_type",
        "nominated",
        "note",
        "reason",
        "requested_at",
        "state",
        "work",
    )

    def __init__(
        self, launch_id: str, node_type: str, requested_at: float, reason: str, work: tuple[str, ...] = ()
    ) -> None:
        self.launch_id, self.node_type, self.requested_at = launch_id, node_type, requested_at
        self.reason, self.work = reason, work
        self.state: LaunchState = "launching"
        self.node_id = ""
        self.note = ""
        """Why it failed, was drained or terminated."""
        self.changed_at = requested_at
        """When `state` last changed (the decider's clock; a registration keeps the previous time)."""
        self.idle_since: float | None = None
        """The log time (Unix seconds) from which its node has held no work: that of its registration or of the
        event that took its last actor, bundle or virtual node; None while it holds some (or has no node)."""
        self.nominated: dict[str, Resources] = {}
        """Pending work (actor or placement group id) its node is nominated for -> the room held for it there; an
        entry ends when the work is placed or gone, or when the launch ends."""
        self.existing: dict[str, dict[str, Resources]] = {}
        """Existing node id -> work this launch is nominated for that the plan also put there -> the room held for
        it there (a placement group mixing existing free room and new nodes); ends as `nominated` does."""
