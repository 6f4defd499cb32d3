"""What the replay of a round's packing needs beyond root-scope work (pure): the footprints of the DataFlow
operations it placed, and the growth of a top-level virtual cluster onto the bins.

A virtual cluster grows as `VirtualClusters.borrow` makes it: its flexible node on a bin nominated for the work
first, then its flexible nodes already on a bin, else a new flexible node on a bin whose free room (less what the
bin holds for other nominated work) can lend the work's needs (the core offers a seeded
sample of such parent nodes; the replay offers every bin, so where it breaks a tie can differ, as on the root).
"""

from __future__ import annotations

from typing import Any

from services.core.autoscale.bins import Bin
from services.core.autoscale.chain import Chain
from services.core.autoscale.demand import ActorDemand
from services.core.cluster import DEFAULT_SAMPLE
from services.core.decide.actor import first_fitting, place_actor
from services.core.plugins.dataflow import footprint
from services.core.prng import SplitMix64
from services.core.state import ClusterView, NodeState, Resources
from services.core.state.indexes import DomainIndex
from services.core.state.model import node_footprint
from services.core.state.nominations import nominated_nodes, unheld
from services.core.state.tree import flexible_id
from services.core.state.work_folds import footprint_of


class Footprints(dict[str, dict[str, str]]):
    """A scope's footprints as the replay sees them: those of the actors it placed, over the scope's own (read,
    never written)."""

    def __init__(self, scope: ClusterView) -> None:
        super().__init__()
        self.scope = scope

    def get(self, key: str, default: Any = None, /) -> Any:
        """The footprint the replay recorded for `key`, else the scope's (a placed group's is empty)."""
        found = super().get(key)
        if found is None:
            found = footprint(self.scope, key)
        return default if found is None else found

    def record(self, demand: ActorDemand, work_id: str, node: NodeState) -> None:
        """`work_id` was placed on `node` in the replay: a later operation inherits where it ran."""
        self[work_id] = footprint_of(demand.work.request, node)


def copied(index: DomainIndex) -> DomainIndex:
    """A copy of a domain index that placements can be counted in."""
    copy = DomainIndex()
    copy.counts = {
        entry: {topology: dict(domains) for topology, domains in by_topology.items()}
        for entry, by_topology in index.counts.items()
    }
    return copy


class Growth:
    """One top-level virtual cluster growing onto the bins during one replay: its flexible node on each bin."""

    def __init__(self, chain: Chain, bins: list[Bin], *, own_indexes: bool, dataflow: bool) -> None:
        self.chain = chain
        scope = chain.vc.scope
        self.actor_index = copied(scope.actor_index) if own_indexes else scope.actor_index
        self.anti_index = copied(scope.anti_index) if own_indexes else scope.anti_index
        self.footprints: dict[str, dict[str, str]] = Footprints(scope) if dataflow else scope.footprints
        self.hosts: dict[str, Bin] = {}
        """Flexible node id -> the bin it is carved from."""
        self.fresh = self._view()
        """The cluster's possible new flexible nodes: one per bin it may use, empty (as `stand_ins` makes them)."""
        self.grown = self._view()
        """Its flexible nodes the replay grew so far, holding what was placed on them."""
        for target in bins:
            seen = None if target.existing else chain.stand_in(target.node)
            if seen is not None:
                node = NodeState(seen.node_id, seen.hash_key, {}, seen.labels)
                node.set_taints(list(seen.taints))
                node.footprint = node_footprint(node)
                self.fresh.add_live_node(node)
                self.hosts[node.node_id] = target

    def _view(self) -> ClusterView:
        scope = self.chain.vc.scope
        view = ClusterView(scope.seed, tree=scope.tree, scope_id=scope.scope_id)
        view.actor_index, view.anti_index, view.footprints = self.actor_index, self.anti_index, self.footprints
        return view

    def place(self, demand: ActorDemand, work_id: str, prng: SplitMix64, bins: ClusterView) -> bool:
        """Place one actor of the cluster as `borrow` would: on its flexible node on a bin nominated for it, else
        on a grown flexible node, else on a new one; each may grow by its bin's free room (the cap kept the demand
        within the cluster's maximum) less what the bin holds for other nominated work (`bins`' nominations)."""
        work = demand.work
        hosts, priority = self.hosts, work.request.priority

        def room(node: NodeState) -> Resources:
            return unheld(bins, hosts[node.node_id].node, work_id, priority)

        nominated = [flexible_id(self.chain.vc.vc_id, node_id) for node_id in nominated_nodes(bins, work_id)]
        nodes = [
            node for node_id in nominated if (node := self.grown.nodes.get(node_id) or self.fresh.nodes.get(node_id))
        ]
        placed = first_fitting(self.grown, work, nodes, room) if nodes else None
        if placed is None:
            placed = place_actor(self.grown, work, prng, DEFAULT_SAMPLE, room)
        if placed is None:
            placed = place_actor(self.fresh, work, prng, DEFAULT_SAMPLE, room)
        if placed is None:
            return False
        node = self._grow(placed[0].node_id, work.resources)
        self.hosts[node.node_id].load(work_id, work.resources)
        if work.request.labels:
            self.grown.index_actor(work.request, node, 1)
        if isinstance(self.footprints, Footprints):
            self.footprints.record(demand, work_id, node)
        return True

    def _grow(self, node_id: str, need: Resources) -> NodeState:
        """The flexible node `node_id`, grown by `need` (created from its empty stand-in on first use)."""
        node = self.grown.nodes.get(node_id)
        if node is None:
            fresh = self.fresh.nodes[node_id]
            node = NodeState(node_id, fresh.hash_key, {}, fresh.labels)
            node.set_taints(list(fresh.taints))
            node.footprint = fresh.footprint
            self.grown.add_live_node(node)
        for name, amount in need.items():
            node.total[name] = node.total.get(name, 0.0) + amount
            node.free.setdefault(name, 0.0)
        node.note_resources()
        return node
