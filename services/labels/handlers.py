"""Labels commands: register (or resume) a node, change its labels, remove it; each answers events or a message."""

from __future__ import annotations

import time

from schemas import NodeDied
from schemas.commands import RegisterNode, RemoveNode, SetLabels
from services.core.errors import ConflictError
from services.core.node_events import check_present, labels_changed, live_node, node_registered
from services.core.request import check_resources
from services.labels.view import LabelsView
from services.runtime.commands import Noted, Outcome


class LabelsHandlers:
    """Validate a command against the view and return the events it writes."""

    def __init__(self, view: LabelsView, rare_resources: tuple[str, ...], heard_within: float) -> None:
        self.view = view
        self.rare_resources = rare_resources
        self.lately = heard_within
        """A node heard from this many seconds ago or less (the heartbeat timeout: it is reachable) has an agent
        that still runs and will register it again."""

    def register(self, command: RegisterNode) -> Outcome:
        """A new node, or the same live node again (a reconnecting agent): then it resumes with its actors."""
        node = self.view.cluster.nodes.get(command.node_id)
        if node is not None:
            if check_resources("resources", command.resources) != node.total:
                raise ConflictError(
                    f"node_id {command.node_id!r}: already registered with resources {node.total}; "
                    f"a node that changed must be removed first or use a new id"
                )
            self.view.heard_from(command.node_id)
            return f"node {command.node_id} resumed with {len(node.actors)} actor(s)"
        defaults = {
            "hostname": command.hostname,
            "zone": command.zone,
            "region": command.region,
            "accelerator_type": command.accelerator_type,
            "market_type": command.market_type,
            "node_group": command.node_group,
            "node_type": command.node_type,
            "launch_id": command.launch_id,
        }
        event = node_registered(
            self.view.cluster,
            command.node_id,
            command.resources,
            command.labels,
            command.taints,
            rare_resources=self.rare_resources,
            address=command.address,
            defaults=defaults,
            now=time.time(),
        )
        return [event]

    def set_labels(self, command: SetLabels) -> Outcome:
        """Replace the user labels of a live node, or (`merge`) set and remove single keys (a key the node lacks:
        `NotFoundError`)."""
        cluster, node_id = self.view.cluster, command.node_id
        merge, remove, overwrite = command.merge, command.remove, command.overwrite
        event = labels_changed(cluster, node_id, command.labels, merge=merge, remove=remove, overwrite=overwrite)
        check_present(cluster, node_id, labels=remove)
        return [event]

    def remove(self, command: RemoveNode) -> Outcome:
        """Take a live node out now (its actors fail and restart elsewhere when they may) and forget the operator's
        edits of its labels and taints; warn when its agent was heard from lately: it may register the node again."""
        node_id = command.node_id
        live_node(self.view.cluster, node_id)
        removal = [NodeDied(node_id=node_id, removed=True)]
        silent = self.view.silent_for(node_id)
        if silent is None or silent > self.lately:
            return removal
        return Noted(
            removal,
            f"node {node_id} removed, but its agent was heard from {silent:.1f}s ago: if it still runs, it will "
            f"register the node again. To take the node out for good, cordon it (corral cordon {node_id}), drain "
            f"it (corral drain {node_id}) and stop its agent; then remove it, or let its heartbeats lapse.",
        )
