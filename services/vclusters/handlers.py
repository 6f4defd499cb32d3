"""vclusters commands: validate a request or destroy with the core, then write the intent the scheduler acts on."""

from __future__ import annotations

from schemas.commands import CreateVirtualCluster, DestroyVirtualCluster
from services.core.errors import ConflictError, LabelError, NotFoundError, RejectedError
from services.core.vclusters.spec import destroy_requested, requested
from services.runtime.commands import Outcome
from services.vclusters.view import VClustersView


class VClustersHandlers:
    """Validate a virtual-cluster command against the view and return the intent event it writes."""

    def __init__(self, view: VClustersView, rare_resources: tuple[str, ...]) -> None:
        self.view = view
        self.rare_resources = rare_resources

    def create(self, command: CreateVirtualCluster) -> Outcome:
        """Ask for a new cluster; the same request again is accepted without a second event."""
        tree = self.view.cluster.view.tree
        try:
            event = requested(tree, command.vc_id, command.spec, command.parent, command.priority, self.rare_resources)
        except (NotFoundError, LabelError):
            raise
        except RejectedError as error:
            if command.vc_id in tree.clusters:
                raise ConflictError(str(error)) from None
            raise
        if event is None:
            return f"virtual cluster {command.vc_id} was already requested ({tree.clusters[command.vc_id].status})"
        return [event]

    def destroy(self, command: DestroyVirtualCluster) -> Outcome:
        """Destroy a cluster and its children; refused while they hold live work, unless forced."""
        vc = self.view.known(command.vc_id)
        if vc.destroying:
            return f"virtual cluster {command.vc_id} is already being destroyed"
        return [destroy_requested(self.view.cluster.view.tree, command.vc_id, command.force)]
