"""The autoscaler's configuration: YAML text in the shape of Ray's `available_node_types` -> `ScalingConfig` (pure).

Every field is checked; a bad one raises a `RejectedError` naming the field, the value and the rule, and an
unknown key is refused (a misspelt `max_worker` must not silently mean "no limit").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from schemas import Taint
from services.core.documents import load_document
from services.core.errors import LabelError, RejectedError, rule_error
from services.core.labels import NODE_TYPE, SYSTEM_PREFIX, validate_label_value, validate_labels
from services.core.request import TAINT_EFFECTS, check_resources, check_taints
from services.core.state import Resources

ProviderType = Literal["local", "command"]
PROVIDER_TYPES: Final[tuple[ProviderType, ...]] = ("local", "command")
TOP_KEYS: Final = ("provider", "idle_timeout_s", "upscaling_speed", "launch_timeout_s", "node_types")
NODE_TYPE_KEYS: Final = ("resources", "labels", "taints", "min_workers", "max_workers", "cost")
DEFAULT_IDLE_TIMEOUT_S: Final = 60.0
DEFAULT_UPSCALING_SPEED: Final = 1.0
DEFAULT_LAUNCH_TIMEOUT_S: Final = 120.0
MAX_NODE_TYPES: Final = 1_000
"""The most node types one configuration names (each is planned for in every round)."""


@dataclass(frozen=True)
class ProviderConfig:
    """Who starts and stops nodes: `local` (node agents in the autoscaler's process) or `command` lines."""

    type: ProviderType = "local"
    launch: str = ""
    """`command`: the command line that launches one node (its type, launch id... in the environment)."""
    terminate: str = ""
    """`command`: the command line that terminates one node."""


@dataclass(frozen=True)
class NodeType:
    """One kind of node the autoscaler may launch: what it holds, its labels and taints, how many, its cost."""

    name: str
    resources: Resources
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    min_workers: int = 0
    max_workers: int = 0
    cost: float = 1.0
    """Relative price of one node; the planner prefers the cheapest type that serves the demand."""


@dataclass(frozen=True)
class ScalingConfig:
    """The whole configuration: provider, timing, speed, and the node types by name (in the file's order)."""

    provider: ProviderConfig
    node_types: dict[str, NodeType]
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    upscaling_speed: float = DEFAULT_UPSCALING_SPEED
    launch_timeout_s: float = DEFAULT_LAUNCH_TIMEOUT_S


def parse_config(text: str | bytes, source: str = "autoscaler config") -> ScalingConfig:
    """Parse and check a YAML configuration (within `documents`' limits: size, nesting, no aliases); a
    `RejectedError` names `source`, the field, the value and the rule."""
    data = load_document(text, source)
    try:
        return config_from(data)
    except RejectedError as error:
        raise type(error)(f"{source}: {error}") from error


def config_from(data: object) -> ScalingConfig:
    """Check an already loaded mapping (the YAML document) and build the configuration."""
    top = _mapping("the configuration", data, TOP_KEYS)
    if "node_types" not in top:
        raise rule_error("node_types", None, "is required: a map of node type names to node types")
    types = _mapping("node_types", top["node_types"], None)
    if not types:
        raise rule_error("node_types", types, "must name at least one node type")
    if len(types) > MAX_NODE_TYPES:
        raise RejectedError(f"node_types: {len(types)} node types, over the limit of {MAX_NODE_TYPES}")
    return ScalingConfig(
        provider=_provider(top.get("provider", {"type": "local"})),
        node_types={name: _node_type(name, spec) for name, spec in types.items()},
        idle_timeout_s=_seconds("idle_timeout_s", top.get("idle_timeout_s", DEFAULT_IDLE_TIMEOUT_S)),
        upscaling_speed=_positive("upscaling_speed", top.get("upscaling_speed", DEFAULT_UPSCALING_SPEED)),
        launch_timeout_s=_seconds("launch_timeout_s", top.get("launch_timeout_s", DEFAULT_LAUNCH_TIMEOUT_S)),
    )


def _mapping(where: str, value: object, keys: tuple[str, ...] | None) -> dict[str, object]:
    """A mapping with string keys (only `keys`, when given)."""
    if not isinstance(value, Mapping):
        raise rule_error(where, value, "must be a mapping")
    for key in value:
        if not isinstance(key, str) or not key:
            raise rule_error(f"{where} key", key, "must be a non-empty string")
        if keys is not None and key not in keys:
            raise rule_error(f"{where} key", key, f"is unknown; expected one of {', '.join(keys)}")
    return dict(value)


def _number(field_name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise rule_error(field_name, value, "must be a finite number")
    return float(value)


def _positive(field_name: str, value: object) -> float:
    number = _number(field_name, value)
    if number <= 0:
        raise rule_error(field_name, value, "must be a number > 0")
    return number


def _seconds(field_name: str, value: object) -> float:
    return _positive(field_name, value)


def _count(field_name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise rule_error(field_name, value, "must be a whole number >= 0")
    return value


def _provider(value: object) -> ProviderConfig:
    spec = _mapping("provider", value, ("type", "launch", "terminate"))
    kind = spec.get("type")
    if kind not in PROVIDER_TYPES:
        raise rule_error("provider.type", kind, f"must be one of {', '.join(PROVIDER_TYPES)}")
    commands = {}
    for name in ("launch", "terminate"):
        given = spec.get(name, "")
        if kind == "local" and name in spec:
            raise rule_error(f"provider.{name}", given, "is only for provider type 'command'")
        if kind == "command" and (not isinstance(given, str) or not given.strip()):
            raise rule_error(f"provider.{name}", given, "must be a non-empty command line for provider type 'command'")
        commands[name] = str(given)
    return ProviderConfig("local" if kind == "local" else "command", commands["launch"], commands["terminate"])


def _node_type(name: str, value: object) -> NodeType:
    where = f"node_types.{name}"
    try:
        validate_label_value(NODE_TYPE, name)
    except LabelError as error:
        raise rule_error(where, name, f"a node type's name is its nodes' {NODE_TYPE} label: {error}") from None
    spec = _mapping(where, value, NODE_TYPE_KEYS)
    resources = check_resources(f"{where}.resources", spec.get("resources", {}))
    if not resources:
        raise rule_error(f"{where}.resources", spec.get("resources"), "must give the node some resource")
    labels = _labels(where, spec.get("labels", {}))
    minimum = _count(f"{where}.min_workers", spec.get("min_workers", 0))
    if "max_workers" not in spec:
        raise rule_error(f"{where}.max_workers", None, "is required (a whole number >= min_workers)")
    maximum = _count(f"{where}.max_workers", spec["max_workers"])
    if maximum < minimum:
        raise rule_error(f"{where}.max_workers", maximum, f"must be >= min_workers ({minimum})")
    cost = _number(f"{where}.cost", spec.get("cost", 1.0))
    if cost < 0:
        raise rule_error(f"{where}.cost", spec.get("cost"), "must be a number >= 0")
    return NodeType(name, resources, labels, _taints(where, name, spec.get("taints", {})), minimum, maximum, cost)


def _labels(where: str, value: object) -> dict[str, str]:
    labels = _mapping(f"{where}.labels", value, None)
    for key, label in labels.items():
        if not isinstance(label, str):
            raise rule_error(f"{where}.labels[{key!r}]", label, "must be a string (quote values like true or 4)")
        if key.startswith(SYSTEM_PREFIX):
            raise rule_error(f"{where}.labels key", key, f"the prefix {SYSTEM_PREFIX!r} is reserved for system labels")
    try:
        return validate_labels({key: str(label) for key, label in labels.items()})
    except LabelError as error:
        raise LabelError(f"{where}.labels: {error}") from error


def _taints(where: str, name: str, value: object) -> tuple[Taint, ...]:
    """`key: value` (NoSchedule) or `key: "value:Effect"`."""
    spec = _mapping(f"{where}.taints", value, None)
    taints = []
    for key, raw in spec.items():
        if not isinstance(raw, str):
            raise rule_error(f"{where}.taints[{key!r}]", raw, 'must be a string "value" or "value:Effect" (quote true)')
        taint_value, colon, effect = raw.partition(":")
        if colon and effect not in TAINT_EFFECTS:
            raise rule_error(f"{where}.taints[{key!r}]", raw, f"effect must be one of {', '.join(TAINT_EFFECTS)}")
        taints.append(Taint(key, taint_value, effect if colon else "NoSchedule"))  # type: ignore[arg-type]
    try:
        return tuple(check_taints(name, taints))
    except LabelError as error:
        raise LabelError(f"{where}.taints: {error}") from error
