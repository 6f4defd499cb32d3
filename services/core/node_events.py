"""Validate node commands against a view and build the events they write (pure; shared by `Cluster` and services)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from schemas import NodeLabelsChanged, NodeRegistered, OperatorLabels, OperatorTaints, Taint, TaintsChanged
from services.core.errors import ConflictError, LabelError, NotFoundError, RejectedError, rule_error
from services.core.labels import default_labels, user_labels, validate_labels
from services.core.request import TAINT_EFFECTS, check_id, check_resources, check_taints, rare_taint_key
from services.core.state import ClusterView, NodeState
from services.core.state.layers import (
    effective_labels,
    effective_taints,
    labels_replaced,
    labels_set,
    taints_put,
    taints_taken,
)
from services.core.state.model import Layers


def live_node(view: ClusterView, node_id: str) -> NodeState:
    """The live node `node_id`, or a `NotFoundError` naming it."""
    node = view.nodes.get(node_id)
    if node is None:
        raise NotFoundError(f"node_id {node_id!r}: no such node")
    return node


def node_registered(
    view: ClusterView,
    node_id: str,
    resources: dict[str, float],
    labels: dict[str, str] | None = None,
    taints: dict[str, str] | list[Taint] | None = None,
    *,
    rare_resources: tuple[str, ...] = (),
    address: str = "",
    defaults: dict[str, str | None] | None = None,
    now: float = 0.0,
) -> NodeRegistered:
    """A new node: resources, user and default labels (`defaults`: zone, hostname...), static and rare taints; a
    node an operator removed says how long before `now` (Unix seconds) it was removed."""
    check_id("node_id", node_id)
    if node_id in view.nodes:
        raise RejectedError(f"node_id {node_id!r}: a node with this id is already registered")
    total = check_resources("resources", resources)
    try:
        user = validate_labels(labels or {})
        system = default_labels(node_id, **(defaults or {}))
    except LabelError as error:
        raise LabelError(f"node {node_id!r}: {error}") from error
    node_taints = check_taints(node_id, taints or {})
    for resource in rare_resources:
        if total.get(resource, 0.0) > 0:
            node_taints.append(Taint(rare_taint_key(resource), "true"))
    tombstone = view.dead.get(node_id)
    removed_at = tombstone.removed_at if tombstone is not None else None
    return NodeRegistered(
        node_id=node_id,
        resources=total,
        labels={**user, **system},
        taints=node_taints,
        address=address,
        removed_before=None if removed_at is None else max(0.0, now - removed_at),
    )


def labels_changed(
    view: ClusterView,
    node_id: str,
    labels: dict[str, str],
    *,
    merge: bool = False,
    remove: Sequence[str] = (),
    overwrite: bool = False,
) -> NodeLabelsChanged:
    """An operator's edit: replace the node's user labels (its system labels stay), or with `merge` set the keys of
    `labels` (changing a key's value only with `overwrite`) and remove the keys of `remove`. The edit holds when
    the node's agent registers again."""
    node = live_node(view, node_id)
    if merge:
        wanted = merged_labels(node, labels, remove, overwrite=overwrite)
    elif remove:
        raise rule_error("remove", list(remove), "removes keys only with merge (a replacement sets every user label)")
    else:
        wanted = labels
    try:
        validate_labels(wanted)
    except LabelError as error:
        raise LabelError(f"node {node_id!r}: {error}") from error
    layers = node_layers(node)
    edits = labels_set(layers, labels, remove) if merge else labels_replaced(layers, labels)
    return NodeLabelsChanged(node_id=node_id, labels=effective_labels(with_labels(layers, edits)), operator=edits)


def merged_labels(node: NodeState, labels: dict[str, str], remove: Sequence[str], *, overwrite: bool) -> dict[str, str]:
    """The node's user labels with `labels` set and the keys of `remove` removed; a key both set and removed, or
    whose value would change without `overwrite`, is refused naming it."""
    if isinstance(remove, str) or not all(isinstance(key, str) for key in remove):
        raise rule_error("remove", remove, "must be a list of label keys")
    current = user_labels(node.labels)
    for key, value in labels.items():
        if key in remove:
            raise rule_error(f"label {key!r}", value, "a key cannot be both set and removed")
        if key in current and current[key] != value and not overwrite:
            raise ConflictError(
                f"label {key!r} already has a value ({current[key]!r}): overwrite (--overwrite) to change it to "
                f"{value!r}"
            )
    return {key: value for key, value in current.items() if key not in remove} | labels


def taints_added(view: ClusterView, node_id: str, taints: dict[str, str] | list[Taint]) -> TaintsChanged:
    """An operator's edit: the node's taints with `taints` appended (a taint with the same key and effect is
    replaced). The edit holds when the node's agent registers again."""
    node = live_node(view, node_id)
    layers = node_layers(node)
    edits = taints_put(layers, check_taints(node_id, taints))
    return TaintsChanged(node_id=node_id, taints=effective_taints(with_taints(layers, edits)), operator=edits)


def taints_removed(
    view: ClusterView, node_id: str, keys: list[str], effects: Mapping[str, Sequence[str]] | None = None
) -> TaintsChanged:
    """An operator's edit: the node's taints without any taint whose key is in `keys`, nor any whose key and effect
    `effects` names (an agent's taint stays removed when the agent registers again)."""
    node = live_node(view, node_id)
    if isinstance(keys, str) or not all(isinstance(key, str) for key in keys):
        raise RejectedError(f"keys {keys!r}: must be a list of taint keys")
    for key, named in (effects or {}).items():
        if isinstance(named, str) or not all(effect in TAINT_EFFECTS for effect in named):
            raise rule_error(f"effects[{key!r}]", named, f"must be a list of {', '.join(TAINT_EFFECTS)}")
    gone, gone_effects = set(keys), effects or {}
    layers = node_layers(node)
    edits = taints_taken(layers, lambda taint: taint.key in gone or taint.effect in gone_effects.get(taint.key, ()))
    return TaintsChanged(node_id=node_id, taints=effective_taints(with_taints(layers, edits)), operator=edits)


def check_present(
    view: ClusterView,
    node_id: str,
    *,
    labels: Sequence[str] = (),
    taints: Sequence[str] = (),
    effects: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """An operator's removal names only what the live node has: `NotFoundError` naming the first label key, taint
    key or taint key and effect it lacks (as kubectl answers, and before anything changes)."""
    node = live_node(view, node_id)
    present = user_labels(node.labels)
    for key in labels:
        if key not in present:
            raise NotFoundError(f"label {key!r} not found on node {node_id}")
    for key in taints:
        if all(taint.key != key for taint in node.taints):
            raise NotFoundError(f"taint {key!r} not found on node {node_id}")
    for key, named in (effects or {}).items():
        for effect in named:
            if all((taint.key, taint.effect) != (key, effect) for taint in node.taints):
                raise NotFoundError(f"taint {key}:{effect} not found on node {node_id}")


def node_layers(node: NodeState) -> Layers:
    """The node's layers (a node without: all its labels and taints its agent's)."""
    return node.layers or Layers(node.labels, list(node.declared_taints))


def with_labels(layers: Layers, edits: OperatorLabels) -> Layers:
    """`layers` with the operator's label edits `edits` instead."""
    return Layers(layers.agent_labels, layers.agent_taints, edits, layers.operator_taints)


def with_taints(layers: Layers, edits: OperatorTaints) -> Layers:
    """`layers` with the operator's taint edits `edits` instead."""
    return Layers(layers.agent_labels, layers.agent_taints, layers.operator_labels, edits)
