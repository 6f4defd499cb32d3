"""A node's labels and taints in layers: its agent's declaration, an operator's edits on top (pure).

Each function here is one rule of the layering: what the layers give, how an operator's command changes the
operator's layer, and the operator's layer an event written before layers were kept apart implies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from schemas import OperatorLabels, OperatorTaints, Taint
from schemas.queries import NodeLayers
from services.core.labels import user_labels
from services.core.state.model import Layers, NodeState

TaintId = tuple[str, str]
"""What names a taint in a node's list: its key and effect (a second taint with both replaces the first)."""


def taint_id(taint: Taint) -> TaintId:
    """The key and effect of `taint`."""
    return taint.key, taint.effect


def layers_of(node: NodeState) -> NodeLayers | None:
    """The node's layers as queries answer and snapshots keep them (None for a node without: a virtual node)."""
    layers = node.layers
    if layers is None:
        return None
    return NodeLayers(layers.agent_labels, layers.agent_taints, layers.operator_labels, layers.operator_taints)


def effective_labels(layers: Layers) -> dict[str, str]:
    """The agent's labels without those the operator removed, with the operator's set over them."""
    edits = layers.operator_labels
    removed = set(edits.removed)
    return {key: value for key, value in layers.agent_labels.items() if key not in removed} | edits.labels


def effective_taints(layers: Layers) -> list[Taint]:
    """The agent's taints the operator neither removed nor changed, then the operator's."""
    edits = layers.operator_taints
    hidden = {taint_id(taint) for taint in [*edits.removed, *edits.taints]}
    return [taint for taint in layers.agent_taints if taint_id(taint) not in hidden] + list(edits.taints)


def labels_set(layers: Layers, labels: Mapping[str, str], remove: Iterable[str]) -> OperatorLabels:
    """The operator's edits with `labels` set and the keys of `remove` removed (an agent's key is then kept
    removed; a key only the operator had is just dropped)."""
    edits, gone = layers.operator_labels, set(remove)
    agent = user_labels(layers.agent_labels)
    kept = {key: value for key, value in edits.labels.items() if key not in gone} | dict(labels)
    removed = {key for key in edits.removed if key not in labels} | {key for key in gone if key in agent}
    return OperatorLabels(kept, sorted(removed))


def labels_replaced(layers: Layers, labels: Mapping[str, str]) -> OperatorLabels:
    """The operator's edits when the operator names every user label: `labels`, every other one removed."""
    others = set(user_labels(layers.agent_labels)) | set(layers.operator_labels.removed)
    return OperatorLabels(dict(labels), sorted(others - set(labels)))


def taints_put(layers: Layers, taints: Iterable[Taint]) -> OperatorTaints:
    """The operator's edits with `taints` added (each replacing an earlier taint of its key and effect)."""
    edits, added = layers.operator_taints, list(taints)
    named = {taint_id(taint) for taint in added}
    kept = [taint for taint in edits.taints if taint_id(taint) not in named]
    return OperatorTaints(kept + added, [taint for taint in edits.removed if taint_id(taint) not in named])


def taints_taken(layers: Layers, matches: Callable[[Taint], bool]) -> OperatorTaints:
    """The operator's edits without the taints `matches` picks: the operator's own dropped, the agent's removed."""
    edits = layers.operator_taints
    removed = {taint_id(taint) for taint in edits.removed}
    newly = [taint for taint in layers.agent_taints if matches(taint) and taint_id(taint) not in removed]
    return OperatorTaints([taint for taint in edits.taints if not matches(taint)], [*edits.removed, *newly])


def labels_implied(layers: Layers, labels: Mapping[str, str]) -> OperatorLabels:
    """The operator's edits an old event's full `labels` imply: what differs from the agent's labels, and the
    earlier edits `labels` still agree with."""
    agent, wanted, edits = user_labels(layers.agent_labels), user_labels(dict(labels)), layers.operator_labels
    kept = {key: value for key, value in wanted.items() if agent.get(key) != value or edits.labels.get(key) == value}
    removed = {key for key in [*agent, *edits.removed] if key not in wanted}
    return OperatorLabels(kept, sorted(removed))


def taints_implied(layers: Layers, taints: Iterable[Taint]) -> OperatorTaints:
    """The operator's edits an old event's full `taints` imply: those not the agent's (or earlier the operator's),
    and the agent's (or earlier removed) taints missing from them."""
    wanted, edits = list(taints), layers.operator_taints
    agent, wanted_ids = set(layers.agent_taints), {taint_id(taint) for taint in wanted}
    added = [taint for taint in wanted if taint not in agent or taint in edits.taints]
    seen: set[TaintId] = set()
    removed = []
    for taint in [*edits.removed, *layers.agent_taints]:
        if taint_id(taint) not in wanted_ids and taint_id(taint) not in seen:
            seen.add(taint_id(taint))
            removed.append(taint)
    return OperatorTaints(added, removed)
