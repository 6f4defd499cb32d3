"""A node's liveness from how long it has been silent: unreachable, back, declared dead, dead (pure).

The labels service measures the silences with its clock and appends what `liveness_event` returns; the folds
(`state/node_folds.py`) turn it into the `corral.io/unreachable` taint, and the scheduler evicts what it must.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from schemas import NodeDeclaredDead, NodeDied, NodeReachable, NodeUnreachable, PlacementGroupRequest, ScheduleRequest
from services.core.errors import LabelError
from services.core.labels import UNREACHABLE_TAINT, utc_text
from services.core.selectors import Tolerations
from services.core.state import ClusterView

LivenessEvent = NodeUnreachable | NodeReachable | NodeDeclaredDead | NodeDied


@dataclass(frozen=True)
class Silence:
    """What the labels service measured of one node (seconds; `last_heard` in Unix seconds)."""

    silent_for: float
    """Since its last heartbeat (or registration, or a moment the service could not hear it)."""
    last_heard: float
    heard_again: bool = False
    """A heartbeat came after it became unreachable."""
    unreachable_for: float = 0.0
    """Since it became unreachable (or the service could not hear it)."""
    dead_for: float = 0.0
    """Since it was declared dead."""


def liveness_event(
    view: ClusterView, node_id: str, silence: Silence, timeout: float, grace: float
) -> LivenessEvent | None:
    """What the node's silence calls for: unreachable after `timeout`, declared dead `grace` later while some work on
    it tolerates that, dead once nothing does; back when heard again; None when nothing changes."""
    node = view.nodes.get(node_id)
    if node is None:
        return None
    if node.unreachable_since is None:
        return NodeUnreachable(node_id=node_id, last_heard=silence.last_heard) if silence.silent_for > timeout else None
    if silence.heard_again:
        return NodeReachable(node_id=node_id, unreachable_for=round(silence.unreachable_for, 3))
    unreachable_for = round(silence.unreachable_for, 3)
    limits = stay_limits(view, node_id)
    if node.dead_for is None:
        if unreachable_for <= grace:
            return None
        if any(limit > 0 for limit in limits):
            return NodeDeclaredDead(node_id=node_id, unreachable_for=unreachable_for)
        return NodeDied(node_id=node_id, reason=dead_reason(node.unreachable_since, unreachable_for))
    dead_for = round(silence.dead_for, 3)
    if all(limit <= dead_for for limit in limits):
        return NodeDied(node_id=node_id, reason=dead_reason(node.unreachable_since, unreachable_for))
    if any(node.dead_for < limit <= dead_for for limit in limits):
        return NodeDeclaredDead(node_id=node_id, unreachable_for=unreachable_for, dead_for=dead_for)
    return None


def dead_reason(since: float, unreachable_for: float) -> str:
    """`declared dead after 31s unreachable (last heard 2026-11-28T14:02:11Z)`."""
    return f"declared dead after {unreachable_for:.0f}s unreachable (last heard {utc_text(since)})"


def stay_limits(view: ClusterView, node_id: str) -> list[float]:
    """How long each actor and bundle on the node (and on the virtual nodes carved from it) stays once the node is
    declared dead: 0 without a toleration of `corral.io/unreachable`, its `toleration_seconds`, or for ever (inf)."""
    node = view.nodes.get(node_id)
    if node is None:
        return []
    value = node.unreachable.value if node.unreachable is not None else ""
    limits = [
        _stay(view.actors[actor_id].request, value)
        for actor_id in sorted(node.actors)
        if view.actors[actor_id].bundle is None
    ]
    limits += [_stay(view.groups[pg_id].request, value) for pg_id, _ in sorted(node.bundles)]
    for vnode_id, vc_id in sorted(view.carved.get(node_id, {}).items()):
        limits += stay_limits(view.tree.clusters[vc_id].scope, vnode_id)
    return limits


def _stay(request: ScheduleRequest | PlacementGroupRequest, value: str) -> float:
    """0 for tolerations the log holds but no request could carry (work never refused when it was folded)."""
    try:
        tolerations = Tolerations.parse(request.tolerations).timed(request.toleration_seconds)
    except LabelError:
        return 0.0
    if not tolerations.tolerates(UNREACHABLE_TAINT, value):
        return 0.0
    return tolerations.seconds.get(UNREACHABLE_TAINT, math.inf)
