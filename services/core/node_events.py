"""Validate node commands against a view and build the events they write (pure; shared by `Cluster` and services)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from schemas import NodeLabelsChanged, NodeRegistered, Taint, TaintsChanged
from services.core.errors import ConflictError, LabelError, NotFoundError, RejectedError, rule_error
from services.core.labels import SYSTEM_PREFIX, default_labels, validate_labels
from services.core.request import TAINT_EFFECTS, check_id, check_resources, check_taints, rare_taint_key
from services.core.state import ClusterView, NodeState


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
) -> NodeRegistered:
    """A new node: resources, user and default labels (`defaults`: zone, hostname...), static and rare taints."""
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
    return NodeRegistered(
        node_id=node_id, resources=total, labels={**user, **system}, taints=node_taints, address=address
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
    """Replace the node's user labels; its system labels stay. With `merge`: set the keys of `labels` (changing a
    key's value only with `overwrite`) and remove the keys of `remove`."""
    node = live_node(view, node_id)
    if merge:
        labels = merged_labels(node, labels, remove, overwrite=overwrite)
    elif remove:
        raise rule_error("remove", list(remove), "removes keys only with merge (a replacement sets every user label)")
    try:
        user = validate_labels(labels)
    except LabelError as error:
        raise LabelError(f"node {node_id!r}: {error}") from error
    system = {key: value for key, value in node.labels.items() if key.startswith(SYSTEM_PREFIX)}
    return NodeLabelsChanged(node_id=node_id, labels={**user, **system})


def merged_labels(node: NodeState, labels: dict[str, str], remove: Sequence[str], *, overwrite: bool) -> dict[str, str]:
    """The node's user labels with `labels` set and the keys of `remove` removed; a key both set and removed, or
    whose value would change without `overwrite`, is refused naming it."""
    if isinstance(remove, str) or not all(isinstance(key, str) for key in remove):
        raise rule_error("remove", remove, "must be a list of label keys")
    current = {key: value for key, value in node.labels.items() if not key.startswith(SYSTEM_PREFIX)}
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
    """The node's taints with `taints` appended (a taint with the same key and effect is replaced)."""
    node = live_node(view, node_id)
    added = check_taints(node_id, taints)
    replaced = {(taint.key, taint.effect) for taint in added}
    kept = [taint for taint in node.declared_taints if (taint.key, taint.effect) not in replaced]
    return TaintsChanged(node_id=node_id, taints=kept + added)


def taints_removed(
    view: ClusterView, node_id: str, keys: list[str], effects: Mapping[str, Sequence[str]] | None = None
) -> TaintsChanged:
    """The node's taints without any taint whose key is in `keys`, nor any whose key and effect `effects` names."""
    node = live_node(view, node_id)
    if isinstance(keys, str) or not all(isinstance(key, str) for key in keys):
        raise RejectedError(f"keys {keys!r}: must be a list of taint keys")
    for key, named in (effects or {}).items():
        if isinstance(named, str) or not all(effect in TAINT_EFFECTS for effect in named):
            raise rule_error(f"effects[{key!r}]", named, f"must be a list of {', '.join(TAINT_EFFECTS)}")
    gone, gone_effects = set(keys), effects or {}
    return TaintsChanged(
        node_id=node_id,
        taints=[
            taint
            for taint in node.declared_taints
            if taint.key not in gone and taint.effect not in gone_effects.get(taint.key, ())
        ],
    )
