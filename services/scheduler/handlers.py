"""Scheduler requests: each becomes a core call; the reply is the decision, accepted, or a clear rejection."""

from __future__ import annotations

from schemas.commands import (
    CreatePlacementGroup,
    RemoveActor,
    RemovePlacementGroup,
    ReportActorFailed,
    SchedulerRequest,
    SubmitActor,
)
from schemas.proposals import Proposal
from schemas.replies import Accepted, RequestReply
from services.core.cluster import Cluster
from services.core.errors import RejectedError
from services.runtime.commands import rejection
from services.scheduler.view import SchedulerView


def handle(view: SchedulerView, request: SchedulerRequest) -> RequestReply:
    """Apply one request to the cluster (a live id returns its decision again and changes nothing); its events wait
    in `view.unwritten` for the writer."""
    try:
        return view.decide(lambda: _apply(view.cluster, request))
    except RejectedError as error:  # any other error is a bug: the request is set aside (see `app._decide`)
        return rejection(error)


def _apply(cluster: Cluster, request: SchedulerRequest) -> RequestReply:
    if isinstance(request, SubmitActor):
        return cluster.submit(request.request)
    if isinstance(request, CreatePlacementGroup):
        return cluster.create_placement_group(request.request)
    if isinstance(request, RemoveActor):
        cluster.remove_actor(request.actor_id)
        return Accepted(message=f"actor {request.actor_id} removed")
    if isinstance(request, ReportActorFailed):
        cluster.fail_actor(request.actor_id)
        restarts = request.actor_id in cluster.view.scope_of(request.actor_id).actors
        return Accepted(message=f"actor {request.actor_id} failed" + (" and restarts" if restarts else " for good"))
    assert isinstance(request, RemovePlacementGroup)
    cluster.remove_placement_group(request.pg_id)
    return Accepted(message=f"placement group {request.pg_id} removed")


def handle_proposal(view: SchedulerView, proposal: Proposal, folded: int) -> RequestReply | None:
    """Apply a decision worker's proposal (decided on a view at sequence `folded`) if this view agrees with it;
    None when it does not (nothing changed). A request without a chosen node is decided here, as `handle` does."""
    request = proposal.request
    if not proposal.node_id or not isinstance(request, SubmitActor):
        return handle(view, request)
    try:
        return view.decide(
            lambda: view.cluster.submit_proposed(request.request, proposal.node_id, proposal.prng, folded)
        )
    except RejectedError as error:
        return rejection(error)
