"""Collect the pending work of a view as demand: identical requests grouped before any per-node work (pure)."""

from __future__ import annotations

from typing import Final

import msgspec

from schemas import PlacementGroupSchedulingStrategy
from services.core.autoscale.chain import Chain
from services.core.autoscale.demand import ActorDemand, Demand
from services.core.autoscale.gangs import GroupDemand, QueuedClusterDemand
from services.core.request import CompiledGroup, CompiledRequest
from services.core.state import ClusterView
from services.core.vclusters.spec import CompiledSpec

_ENCODE: Final = msgspec.json.Encoder().encode


def collect(view: ClusterView, rare_resources: tuple[str, ...]) -> list[Demand]:
    """The pending actors and placement groups of the root and every virtual cluster, and every queued virtual
    cluster (under the root or another cluster), identical ones grouped (same request but for the id).

    Actors waiting for a bundle of their placement group are not demand: the group is.
    """
    groups: dict[bytes, Demand] = {}
    chains = {vc_id: Chain(view, vc, rare_resources) for vc_id, vc in view.tree.clusters.items()}
    for scope in [view, *(vc.scope for vc in view.tree.clusters.values())]:
        chain = chains[scope.scope_id] if scope.scope_id else None
        for work_id in scope.pending:
            actor = scope.actors.get(work_id)
            if actor is not None:
                request = actor.request
                if isinstance(request.scheduling_strategy, PlacementGroupSchedulingStrategy):
                    continue
                key = b"actor" + _ENCODE(msgspec.structs.replace(request, actor_id=""))
                demand = groups.get(key)
                if demand is None:
                    work = CompiledRequest(request, rare_resources)
                    demand = groups[key] = ActorDemand(key, scope, work, chain)
            else:
                group = scope.groups[work_id].request
                key = b"group" + _ENCODE(msgspec.structs.replace(group, pg_id=""))
                demand = groups.get(key)
                if demand is None:
                    demand = groups[key] = GroupDemand(key, scope, CompiledGroup(group, rare_resources))
            demand.work_ids.append(work_id)
    queued = [vc for vc in view.tree.clusters.values() if vc.status == "queued" and not vc.destroying]
    for vc in sorted(queued, key=lambda vc: (-vc.priority, vc.arrival)):  # the order admission tries them
        key = b"vcluster" + _ENCODE((vc.spec, vc.priority)) + vc.parent.encode()
        found = groups.get(key)
        if not isinstance(found, QueuedClusterDemand):
            spec = CompiledSpec(vc.vc_id, vc.spec, rare_resources)
            parent = chains[vc.parent] if vc.parent else None
            found = groups[key] = QueuedClusterDemand(key, view, vc, spec, rare_resources, parent)
        found.queue(vc.vc_id)
    for demand in groups.values():
        demand.work_ids.sort()
    return list(groups.values())
