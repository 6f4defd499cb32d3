"""Commands: imperative messages a client sends to one service (request/reply) or to the scheduler (durable)."""

from __future__ import annotations

from typing import Annotated

import msgspec

from schemas.requests import Amounts, PlacementGroupRequest, ScheduleRequest, Taint, TaintEffect
from schemas.vclusters import VirtualCluster


class Command(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Envelope fields every command carries: a client-chosen id (idempotency key) and a correlation id."""

    command_id: str = ""
    correlation_id: str = ""


# labels service: `corral.cmd.labels.<verb>`


class RegisterNode(Command, frozen=True, kw_only=True):
    """Register a node (or resume it: the same id and resources again keeps its actors)."""

    node_id: str
    resources: Amounts
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    address: str = ""
    hostname: str | None = None
    zone: str | None = None
    region: str | None = None
    accelerator_type: str | None = None
    market_type: str | None = None
    node_group: str | None = None
    node_type: str | None = None
    """The autoscaler's node type (system label `corral.io/node-type`), for a node it launched."""
    launch_id: str | None = None
    """The autoscaler's launch id (system label `corral.io/launch-id`), for a node it launched."""


class SetLabels(Command, frozen=True, kw_only=True):
    """Replace a node's user labels (system labels stay). With `merge`, set only the keys of `labels` and remove
    the keys of `remove`, in one change, refusing to change a key's value unless `overwrite` (as `kubectl label`)."""

    node_id: str
    labels: dict[str, str]
    merge: bool = False
    remove: list[str] = []
    overwrite: bool = False


class RemoveNode(Command, frozen=True, kw_only=True):
    """Take a node out of the cluster now, as if it died."""

    node_id: str


class Heartbeat(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A node agent is alive (plain publish on `corral.hb.<node>`)."""

    node_id: str


# taints service: `corral.cmd.taints.<verb>`, by node id or by node address


class AddTaints(Command, frozen=True, kw_only=True):
    """Append taints to a node (a taint with the same key and effect is replaced)."""

    taints: list[Taint]
    node_id: str = ""
    node_address: str = ""


class RemoveTaints(Command, frozen=True, kw_only=True):
    """Delete from a node every taint with one of `keys`, and the taints of each key of `effects` with one of its
    effects (as `kubectl taint node N key:Effect-`), in one change."""

    keys: list[str] = []
    effects: dict[str, list[TaintEffect]] = {}
    node_id: str = ""
    node_address: str = ""


# vclusters service: `corral.cmd.vclusters.<verb>`; the scheduler then admits, queues or destroys


class CreateVirtualCluster(Command, frozen=True, kw_only=True):
    """Ask for a virtual cluster under `parent` (None: the root); the same request again changes nothing."""

    vc_id: str
    spec: VirtualCluster
    parent: str | None = None
    priority: int = 0


class DestroyVirtualCluster(Command, frozen=True, kw_only=True):
    """Destroy a virtual cluster and its children; refused while they have live work, unless `force` stops it."""

    vc_id: str
    force: bool = False


# scheduler: durable requests on `corral.req.<kind>` (the CORRAL_REQUESTS work queue)


class SubmitActor(Command, frozen=True, kw_only=True, tag_field="kind", tag="schedule"):
    """Schedule an actor or task."""

    request: ScheduleRequest


class CreatePlacementGroup(Command, frozen=True, kw_only=True, tag_field="kind", tag="placement_group"):
    """Reserve a placement group."""

    request: PlacementGroupRequest


class RemoveActor(Command, frozen=True, kw_only=True, tag_field="kind", tag="remove_actor"):
    """An actor or task finished or is stopped: free its resources."""

    actor_id: str


class ReportActorFailed(Command, frozen=True, kw_only=True, tag_field="kind", tag="fail_actor"):
    """A running actor failed: it restarts under the same rules while it has restarts left."""

    actor_id: str


class RemovePlacementGroup(Command, frozen=True, kw_only=True, tag_field="kind", tag="remove_placement_group"):
    """Release a placement group; the actors inside it stop."""

    pg_id: str


SchedulerRequest = SubmitActor | CreatePlacementGroup | RemoveActor | ReportActorFailed | RemovePlacementGroup
"""One durable request: what a `RequestBatch` holds, and a message of `CORRAL_REQUESTS` alone."""

MAX_BATCH = 1_000
"""The most requests one `RequestBatch` carries."""


class RequestBatch(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag_field="kind", tag="batch"
):
    """Many durable requests in one message (`corral.req.batch`): stored once, decided in their order, each as it
    would be alone, and answered together by one `BatchReply` once every decision of the batch is durable.

    A request inside carries no idempotency key (`command_id`): the batch's `Nats-Msg-Id` stores it once, and a
    resend of a request whose id is live answers its decision again and changes nothing.
    """

    requests: Annotated[list[SchedulerRequest], msgspec.Meta(min_length=1, max_length=MAX_BATCH)]

    def __post_init__(self) -> None:
        """Refuse a keyed request inside: its key could not be honoured there."""
        for index, request in enumerate(self.requests):
            if getattr(request, "command_id", ""):  # built in code, `requests` may hold anything
                raise ValueError(
                    f"requests[{index}].command_id {request.command_id!r}: a request inside a batch carries no "
                    "idempotency key (the batch is stored once as a whole); send a keyed request alone"
                )


DurableRequest = SchedulerRequest | RequestBatch
"""Everything the scheduler (or a decision worker) consumes from `CORRAL_REQUESTS`."""
