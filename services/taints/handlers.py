"""Taints commands: append or delete taints, and give rare-resource nodes their isolating taint."""

from __future__ import annotations

from schemas import Taint
from schemas.commands import AddTaints, RemoveTaints
from services.core.node_events import check_present, taints_added, taints_removed
from services.core.request import rare_taint_key
from services.runtime.commands import Outcome
from services.taints.view import TaintsView


class TaintsHandlers:
    """Validate a taint command against the view and return the `TaintsChanged` it writes."""

    def __init__(self, view: TaintsView, rare_resources: tuple[str, ...]) -> None:
        self.view = view
        self.rare_resources = rare_resources

    def add(self, command: AddTaints) -> Outcome:
        """Append taints (same key and effect: replaced); NoExecute evicts untolerating actors (the scheduler)."""
        node_id = self.view.resolve(command.node_id, command.node_address)
        return [taints_added(self.view.cluster, node_id, list(command.taints))]

    def remove(self, command: RemoveTaints) -> Outcome:
        """Delete every taint with one of the keys, and those whose key and effect `effects` names (one the node
        lacks: `NotFoundError`)."""
        node_id = self.view.resolve(command.node_id, command.node_address)
        event = taints_removed(self.view.cluster, node_id, list(command.keys), command.effects)
        check_present(self.view.cluster, node_id, taints=command.keys, effects=command.effects)
        return [event]

    def isolate_rare(self) -> Outcome:
        """Nodes with a rare resource but without its taint get it (rare resources configured after they joined)."""
        events = []
        for node_id, node in sorted(self.view.cluster.nodes.items()):
            missing = [
                Taint(rare_taint_key(resource), "true")
                for resource in self.rare_resources
                if node.total.get(resource, 0.0) > 0 and all(t.key != rare_taint_key(resource) for t in node.taints)
            ]
            if missing:
                events.append(taints_added(self.view.cluster, node_id, missing))
        return events or "every rare-resource node is isolated"
