"""Validate a request at the boundary and compile it once: parsed selectors, tolerations, strategy (pure)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Final, Literal

import msgspec

from schemas import (
    ActorAffinityOperator,
    ActorAffinitySchedulingStrategy,
    NodeAffinitySchedulingStrategy,
    NodeLabelSchedulingStrategy,
    PlacementGroupRequest,
    PlacementGroupSchedulingStrategy,
    RunAfter,
    ScheduleRequest,
    SelectorValue,
    Taint,
)
from services.core.errors import ConflictError, LabelError, rule_error
from services.core.labels import UNREACHABLE_TAINT, validate_label_key, validate_label_value, validate_labels
from services.core.selectors import LabelSelector, Tolerations
from services.core.state import Resources
from services.core.type_tests import TypeTest

Policy = Literal["DEFAULT", "SPREAD"]
"""How an actor's placement ranks nodes of equal soft weight (SPREAD: the least used first)."""
POLICIES: Final[tuple[Policy, ...]] = ("DEFAULT", "SPREAD")
Work = ScheduleRequest | PlacementGroupRequest
GROUP_STRATEGIES: Final = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
TAINT_EFFECTS: Final = ("NoSchedule", "PreferNoSchedule", "NoExecute")
RUN_AFTER_POLICIES: Final = ("", "Require", "Prefer")


ID_LIMIT: Final = 253
"""The most characters an id may have."""
_OPERATORS: Final = tuple(ActorAffinityOperator)
_LISTED: Final = (ActorAffinityOperator.IN, ActorAffinityOperator.NOT_IN)
_INFINITY: Final = math.inf
_GROUP_REQUEST: Final[TypeTest[PlacementGroupRequest]] = TypeTest(PlacementGroupRequest)
_NODE_LABELS: Final[TypeTest[NodeLabelSchedulingStrategy]] = TypeTest(NodeLabelSchedulingStrategy)
_NODE_AFFINITY: Final[TypeTest[NodeAffinitySchedulingStrategy]] = TypeTest(NodeAffinitySchedulingStrategy)
_ACTOR_AFFINITY: Final[TypeTest[ActorAffinitySchedulingStrategy]] = TypeTest(ActorAffinitySchedulingStrategy)
_GROUP_TARGET: Final[TypeTest[PlacementGroupSchedulingStrategy]] = TypeTest(PlacementGroupSchedulingStrategy)
"""What every request compiled is asked (see `type_tests`)."""


MAX_FALLBACKS: Final = 8
"""Fallback options a new actor, task or placement group may list: each one is a whole placement attempt."""
MAX_BUNDLES: Final = 1_000
"""Bundles a new placement group may ask for, in its own list and in each fallback's: each bundle is placed in
turn (a group of 20,000 held the scheduler's event loop for seconds, one of 40,000 for minutes)."""
MAX_TOLERATION_S: Final = 604_800
"""The longest `toleration_seconds` (a week): longer, tolerate the taint for ever (no seconds)."""


def check_new_work(request: Work) -> None:
    """Refuse new work past what one decision may cost; work already in the log keeps its size (a fold never
    checks this, so a limit lowered later changes nothing decided before)."""
    if len(request.fallback_strategy) > MAX_FALLBACKS:
        count = len(request.fallback_strategy)
        raise rule_error("fallback_strategy", f"{count} options", f"must have at most {MAX_FALLBACKS} options")
    if not _GROUP_REQUEST.holds(request):
        return
    lists = [("bundles", request.bundles)]
    for index, option in enumerate(request.fallback_strategy):
        if isinstance(option, dict):
            lists.append((f"fallback_strategy[{index}].bundles", option.get("bundles", [])))
    for field, bundles in lists:
        if isinstance(bundles, list) and len(bundles) > MAX_BUNDLES:
            raise rule_error(field, f"{len(bundles):,} bundles", f"must have at most {MAX_BUNDLES:,} bundles")


def check_same_request(field: str, work_id: str, existing: Work, new: Work) -> None:
    """A `ConflictError` naming every field in which `new` differs from the live `existing` request (the values in
    the API's JSON spelling)."""
    changed = [f"{name} {_json(old)} -> {_json(value)}" for name, old, value in differences(existing, new)]
    if changed:
        raise ConflictError(
            f"{field} {work_id!r}: already live with another request ({'; '.join(changed)}); "
            "the same request returns its decision, another needs it removed first or a new id"
        )


def _json(value: object) -> str:
    return msgspec.json.encode(value, order="sorted").decode()


ENVELOPE: Final = ("command_id", "correlation_id")
"""A command's fields that are not its content: its idempotency key and its tracing id."""


def check_same_keyed(key: str, stored: object, sent: msgspec.Struct) -> None:
    """A `ConflictError` naming the idempotency key `key` and how the command `sent` differs from `stored`, the one
    its key was first used for (anything else than a command when that one does not decode)."""
    if type(stored) is not type(sent):
        first = f"a {type(stored).__name__}" if isinstance(stored, msgspec.Struct) else "an unreadable request"
        detail = f"{first}, not a {type(sent).__name__}"
    else:
        assert isinstance(stored, msgspec.Struct)
        changed = []
        for name, old, new in differences(stored, sent):
            if isinstance(old, msgspec.Struct) and isinstance(new, msgspec.Struct) and type(old) is type(new):
                changed.extend(differences(old, new))  # a command's request, field by field
            else:
                changed.append((name, old, new))
        if not changed:
            return
        detail = "; ".join(f"{name}: {old!r} then {new!r}" for name, old, new in changed)
    raise ConflictError(f"command_id {key!r}: already used for a different request ({detail}); use a new key")


def differences(existing: msgspec.Struct, new: msgspec.Struct) -> list[tuple[str, object, object]]:
    """(field, value in `existing`, value in `new`) for each field of two Structs of one type that differs, but the
    envelope's."""
    pairs = ((name, getattr(existing, name), getattr(new, name)) for name in existing.__struct_fields__)
    return [
        (name, old, value)
        for name, old, value in pairs
        if name not in ENVELOPE and _comparable(name, old) != _comparable(name, value)
    ]


def _comparable(name: str, value: object) -> object:
    """The root cluster is both None and "" (`vcluster_id`)."""
    return value or None if name == "vcluster_id" else value


def check_id(field: str, value: object) -> str:
    """An id is a non-empty string of at most 253 characters without whitespace (as `str.isspace` counts it: a
    split on whitespace leaves such a string whole, and costs less than a regular expression on this hot path)."""
    if not isinstance(value, str) or len(value) > ID_LIMIT or value.split() != [value]:
        raise rule_error(field, value, "must be a non-empty string of at most 253 characters without blanks")
    return value


def check_resources(field: str, resources: object) -> Resources:
    """Resources map names to finite amounts >= 0."""
    if not isinstance(resources, dict):
        raise rule_error(field, resources, "must map resource names to amounts")
    for name, amount in resources.items():  # (int, float): a union (int | float) is built anew at every call
        if not isinstance(name, str) or not name:
            raise rule_error(f"{field} name", name, "must be a non-empty string")
        # 0 <= amount < inf refuses NaN, the infinities and negatives, without a call to math.isfinite per amount
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not 0 <= amount < _INFINITY:
            raise rule_error(f"{field}[{name!r}]", amount, "must be a finite number >= 0")
    return {name: float(amount) for name, amount in resources.items() if amount > 0}


def check_taints(node_id: str, taints: object) -> list[Taint]:
    """Taints as `{key: value}` (NoSchedule) or a list of `Taint`."""
    if isinstance(taints, dict):
        taints = [Taint(key, value) for key, value in taints.items()]
    if not isinstance(taints, list):
        raise rule_error(f"taints of node {node_id!r}", taints, "must be a {key: value} map or a list of Taint")
    for taint in taints:
        if not isinstance(taint, Taint):
            raise rule_error(f"taints of node {node_id!r}", taint, "must be a Taint")
        validate_label_key(taint.key, allow_system=True)
        validate_label_value(taint.key, taint.value)
        if taint.effect not in TAINT_EFFECTS:
            raise rule_error(f"taint {taint.key!r} effect", taint.effect, f"must be one of {', '.join(TAINT_EFFECTS)}")
    return list(taints)


def rare_taint_key(resource: str) -> str:
    """The taint a node with a rare resource carries: `rare-resource.corral.io/<resource>`."""
    name = re.sub(r"[^a-z0-9_.-]", "-", resource.lower()).strip("-_.") or "resource"
    return f"rare-resource.corral.io/{name}"


EVERY_NODE: Final = LabelSelector()
"""The selector `{}` compiles to (shared: a compiled selector is never changed)."""
NO_TOLERATIONS: Final = Tolerations({})
"""The tolerations of work that tolerates nothing (shared: compiled tolerations are never changed)."""


def _selector(field: str, spec: Mapping[str, SelectorValue]) -> LabelSelector:
    # `spec` is typed a Mapping, not a dict: compiled, a dict parameter would refuse any other value with a bare
    # TypeError before the parse could refuse it naming the field (the same for `compile_tolerations`)
    if type(spec) is dict and not spec:  # most work selects nothing: no parse
        return EVERY_NODE
    try:
        return LabelSelector.parse(spec)
    except LabelError as error:
        raise LabelError(f"{field}: {error}") from error


def compile_tolerations(
    field: str, spec: Mapping[str, SelectorValue], resources: Resources, rare: tuple[str, ...], seconds: object
) -> Tolerations:
    """The tolerations `spec` (and those of the rare resources asked for), timed by `seconds`."""
    asks_rare = any(resources.get(resource, 0.0) > 0 for resource in rare)
    if type(spec) is dict and not spec and type(seconds) is dict and not seconds and not asks_rare:
        return NO_TOLERATIONS  # most work tolerates nothing
    try:
        tolerations = Tolerations.parse(spec)
    except LabelError as error:
        raise LabelError(f"{field}: {error}") from error
    for resource in rare:
        if resources.get(resource, 0.0) > 0:
            tolerations = tolerations.with_key(rare_taint_key(resource))
    return tolerations.timed(check_toleration_seconds(tolerations, seconds))


def check_toleration_seconds(tolerations: Tolerations, seconds: object) -> dict[str, float]:
    """`toleration_seconds`: only the liveness taint is timed, for 0 to `MAX_TOLERATION_S` seconds, and tolerated."""
    if not isinstance(seconds, dict):
        raise rule_error("toleration_seconds", seconds, "must be a map of taint keys to seconds")
    for key, value in seconds.items():
        field = f"toleration_seconds[{key!r}]"
        if key != UNREACHABLE_TAINT:
            raise rule_error(field, value, f"only {UNREACHABLE_TAINT} (a node declared dead) is timed")
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_TOLERATION_S:
            raise rule_error(field, value, f"must be a number of seconds from 0 to {MAX_TOLERATION_S:,}")
        if key not in tolerations.by_key:
            raise rule_error(field, value, f"times a taint the work does not tolerate: add {key} to tolerations")
    return {key: float(value) for key, value in seconds.items()}


class CompiledRequest:
    """A validated actor request, parsed once and reused on every re-try."""

    __slots__ = (
        "affinity",
        "group_target",
        "node_affinity",
        "node_label_hard",
        "node_label_soft",
        "options",
        "policy",
        "rare",
        "request",
        "resources",
        "run_after",
        "tolerations",
    )

    def __init__(self, request: ScheduleRequest, rare: tuple[str, ...]) -> None:
        self.request, self.rare = request, rare
        check_id("actor_id", request.actor_id)
        check_id("namespace", request.namespace)
        self.resources = check_resources("resources", request.resources)
        try:
            validate_labels(request.labels)
        except LabelError as error:
            raise LabelError(f"labels: {error}") from error
        self.options = [_selector("label_selector", request.label_selector)]
        for index, option in enumerate(request.fallback_strategy):
            if not isinstance(option, dict) or set(option) != {"label_selector"}:
                raise rule_error(f"fallback_strategy[{index}]", option, "must be {'label_selector': {...}}")
            self.options.append(_selector(f"fallback_strategy[{index}].label_selector", option["label_selector"]))
        self.tolerations = compile_tolerations(
            "tolerations", request.tolerations, self.resources, rare, request.toleration_seconds
        )
        restarts, priority = request.max_restarts, request.priority  # each read once: a compiled read is a lookup
        if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < -1:
            raise rule_error("max_restarts", restarts, "must be an integer >= -1 (-1 restarts forever)")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise rule_error("priority", priority, "must be an integer")
        self.policy: Policy = "DEFAULT"
        self.node_label_hard: LabelSelector | None = None
        self.node_label_soft: LabelSelector | None = None
        self.node_affinity: NodeAffinitySchedulingStrategy | None = None
        self.affinity: ActorAffinitySchedulingStrategy | None = None
        self.group_target: PlacementGroupSchedulingStrategy | None = None
        self._strategy(request.scheduling_strategy)
        self.run_after = self._run_after(request.run_after)

    def renamed(self, actor_id: str) -> CompiledRequest:
        """The same request compiled under another id (the autoscaler's replay tries alike work one by one)."""
        return CompiledRequest(msgspec.structs.replace(self.request, actor_id=actor_id), self.rare)

    def _strategy(self, strategy: object) -> None:
        if strategy is None:
            return
        if isinstance(strategy, str):
            if strategy not in POLICIES:
                raise rule_error("scheduling_strategy", strategy, f"must be one of {', '.join(POLICIES)} or a strategy")
            self.policy = strategy
        elif _NODE_LABELS.holds(strategy):
            self.node_label_hard = _selector("scheduling_strategy.hard", strategy.hard) or None
            self.node_label_soft = _selector("scheduling_strategy.soft", strategy.soft) or None
        elif _NODE_AFFINITY.holds(strategy):
            check_id("scheduling_strategy.node_id", strategy.node_id)
            self.node_affinity = strategy
        elif _ACTOR_AFFINITY.holds(strategy):
            self._affinity(strategy)
        elif _GROUP_TARGET.holds(strategy):
            check_id("scheduling_strategy.placement_group_id", strategy.placement_group_id)
            if strategy.bundle_index < -1:
                raise rule_error("scheduling_strategy.bundle_index", strategy.bundle_index, "must be >= -1")
            self.group_target = strategy
        else:
            raise rule_error("scheduling_strategy", strategy, "must be None, DEFAULT, SPREAD or a strategy Struct")

    def _affinity(self, strategy: ActorAffinitySchedulingStrategy) -> None:
        if not strategy.match_expressions:
            raise rule_error("scheduling_strategy.match_expressions", [], "needs at least one expression")
        for index, expression in enumerate(strategy.match_expressions):
            field = f"scheduling_strategy.match_expressions[{index}]"
            try:
                validate_label_key(expression.key, allow_system=True)
                validate_label_key(expression.topology_key, allow_system=True)
                for value in expression.values:
                    validate_label_value(expression.key, value)
            except LabelError as error:
                raise LabelError(f"{field}: {error}") from error
            operator = expression.operator
            if operator not in _OPERATORS:
                raise rule_error(f"{field}.operator", operator, "must be IN, NOT_IN, EXISTS or DOES_NOT_EXIST")
            listed = operator in _LISTED
            if listed and not expression.values:
                raise rule_error(f"{field}.values", expression.values, f"{operator} needs at least one value")
            if not listed and expression.values:
                raise rule_error(f"{field}.values", expression.values, f"{operator} takes no values")
        self.affinity = strategy

    @staticmethod
    def _run_after(run_after: RunAfter | None) -> RunAfter | None:
        if run_after is None:
            return None
        check_id("run_after.operation_id", run_after.operation_id)
        if run_after.policy not in RUN_AFTER_POLICIES:
            raise rule_error("run_after.policy", run_after.policy, "must be '', 'Require' or 'Prefer'")
        try:
            for key in [*run_after.require, *(prefer.name for prefer in run_after.prefer)]:
                validate_label_key(key, allow_system=True)
        except LabelError as error:
            raise LabelError(f"run_after: {error}") from error
        for prefer in run_after.prefer:
            if isinstance(prefer.weight, bool) or not isinstance(prefer.weight, int) or prefer.weight < 0:
                raise rule_error(f"run_after.prefer[{prefer.name!r}].weight", prefer.weight, "must be an integer >= 0")
        return None if run_after.policy == "" else run_after


class GroupOption:
    """One way to place a group: bundle shapes and one selector per bundle."""

    __slots__ = ("bundles", "selectors")

    def __init__(self, bundles: list[Resources], selectors: list[LabelSelector]) -> None:
        self.bundles = bundles
        self.selectors = selectors


class CompiledGroup:
    """A validated placement-group request: its options (primary, then fallbacks) and tolerations."""

    __slots__ = ("options", "rare", "request", "strategy", "tolerations")

    def __init__(self, request: PlacementGroupRequest, rare: tuple[str, ...]) -> None:
        self.request, self.rare = request, rare
        check_id("pg_id", request.pg_id)
        if request.strategy not in GROUP_STRATEGIES:
            raise rule_error("strategy", request.strategy, f"must be one of {', '.join(GROUP_STRATEGIES)}")
        self.strategy = request.strategy
        self.options = [self._option("", request.bundles, request.bundle_label_selector)]
        for index, option in enumerate(request.fallback_strategy):
            field = f"fallback_strategy[{index}]"
            if not isinstance(option, dict) or not set(option) <= {"bundles", "bundle_label_selector"}:
                raise rule_error(field, option, "must be {'bundles': [...], 'bundle_label_selector': [...]}")
            bundles = option.get("bundles", request.bundles)
            self.options.append(self._option(f"{field}.", bundles, option.get("bundle_label_selector", [])))
        everything: Resources = {}
        for option_ in self.options:
            for bundle in option_.bundles:
                for name, amount in bundle.items():
                    everything[name] = max(everything.get(name, 0.0), amount)
        self.tolerations = compile_tolerations(
            "tolerations", request.tolerations, everything, rare, request.toleration_seconds
        )
        if isinstance(request.priority, bool) or not isinstance(request.priority, int):
            raise rule_error("priority", request.priority, "must be an integer")

    def renamed(self, pg_id: str) -> CompiledGroup:
        """The same request compiled under another id (the autoscaler's replay tries alike work one by one)."""
        return CompiledGroup(msgspec.structs.replace(self.request, pg_id=pg_id), self.rare)

    @staticmethod
    def _option(prefix: str, bundles: object, selectors: object) -> GroupOption:
        if not isinstance(bundles, list) or not bundles:
            raise rule_error(f"{prefix}bundles", bundles, "must be a non-empty list of resource maps")
        shapes = [check_resources(f"{prefix}bundles[{i}]", bundle) for i, bundle in enumerate(bundles)]
        for index, shape in enumerate(shapes):
            if not shape:
                raise rule_error(f"{prefix}bundles[{index}]", bundles[index], "must ask for some resource")
        if not isinstance(selectors, list) or (selectors and len(selectors) != len(bundles)):
            raise rule_error(
                f"{prefix}bundle_label_selector", selectors, f"must be empty or have {len(bundles)} entries"
            )
        parsed = [_selector(f"{prefix}bundle_label_selector[{i}]", spec) for i, spec in enumerate(selectors)]
        return GroupOption(shapes, parsed or [LabelSelector()] * len(shapes))
