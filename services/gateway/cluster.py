"""Nodes, actors, placement groups and pending work under /api/v1: listings, explanations and the commands."""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import Router, delete, get, post, put
from litestar.params import HeaderParameter, Parameter, QueryParameter

from schemas import Pending, Placed, PlacementGroupRequest, ScheduleRequest
from schemas.commands import MAX_BATCH
from schemas.queries import ActorInfo, NodeInfo
from schemas.replies import Accepted, Rejected
from services.client import Client
from services.core.errors import rule_error
from services.core.labels import NodeCondition, node_condition, parse_labels
from services.gateway.errors import CHANGES, CHANGES_WITH_BODY
from services.gateway.parsing import selector_of

Vcluster = Annotated[str, QueryParameter(name="vcluster", description="a virtual cluster's id: its own view")]
IdempotencyKey = Annotated[
    str,
    HeaderParameter(
        name="Idempotency-Key",
        description="the same body sent again with the same key is stored once and answered as the first; "
        "another body with a key used within the last 120 s is 409",
    ),
]


class NodeView(NodeInfo, frozen=True):
    """A live node and its state: `draining` (drained, or being scaled down by the autoscaler), `cordoned`,
    `tainted` (a NoSchedule or NoExecute taint keeps work that does not tolerate it off), else `alive`."""

    state: NodeCondition = "alive"


async def nodes_of(client: Client, selector: str = "", vcluster: str = "") -> list[NodeView]:
    """Live nodes matching the selector, each with its state."""
    nodes = await client.nodes(selector_of(selector), vcluster_id=vcluster or None)
    return [NodeView(**msgspec.structs.asdict(node), state=node_condition(node.taints)) for node in nodes]


@get("/nodes")
async def list_nodes(
    client: Client,
    selector: Annotated[str, Parameter(description="label selector: zone=z1,gpu=exists(),tier=in(a,b)")] = "",
    vcluster: Vcluster = "",
) -> list[NodeView]:
    """Live nodes (resources total and available, labels, taints, state) matching the selector."""
    return await nodes_of(client, selector, vcluster)


@put("/nodes/{node_id:str}/labels", status_code=200, guards=CHANGES_WITH_BODY)
async def set_labels(client: Client, node_id: str, data: dict[str, str]) -> Accepted:
    """Replace a node's user labels with the body's key -> value object."""
    return await client.set_labels(node_id, data)


@get("/actors")
async def list_actors(
    client: Client,
    labels: Annotated[str, Parameter(description="only actors with these labels: k=v,k2=v2")] = "",
    namespace: str = "default",
    vcluster: Vcluster = "",
) -> list[ActorInfo]:
    """Placed actors carrying these labels (of one virtual cluster with `vcluster`, on its virtual nodes)."""
    wanted = parse_labels(labels)
    if not vcluster:
        return await client.actors(wanted, namespace)
    actors = (await client.virtual_cluster_work(vcluster)).actors
    return [actor for actor in actors if wanted.items() <= actor.labels.items()]


@post("/actors", status_code=200, guards=CHANGES_WITH_BODY)
async def submit_actor(client: Client, data: ScheduleRequest, idempotency_key: IdempotencyKey = "") -> Placed | Pending:
    """Schedule an actor or task (a ScheduleRequest in the bus's JSON schema): where it runs, or why it waits."""
    return await client.submit(data, command_id=idempotency_key)


@post("/actors/batch", status_code=200, guards=CHANGES_WITH_BODY)
async def submit_actors(client: Client, data: list[ScheduleRequest]) -> list[Placed | Pending | Rejected]:
    """Schedule many actors or tasks in one message (a JSON array of 1 to 1,000 ScheduleRequests, decided in order
    as if sent one by one): an answer for each, in order, a refused one as `{"type": "rejected", ...}`."""
    if not 1 <= len(data) <= MAX_BATCH:
        raise rule_error("body", f"an array of {len(data)} requests", f"must hold at least 1 and at most {MAX_BATCH}")
    return await client.submit_many(data)


@get("/actors/{actor_id:str}/why")
async def why(client: Client, actor_id: str) -> Placed | Pending:
    """Where an actor runs, or why it waits: the message, the reasons and the node ids behind each."""
    return await client.why(actor_id)


@delete("/actors/{actor_id:str}", status_code=200, guards=CHANGES)
async def remove_actor(client: Client, actor_id: str) -> Accepted:
    """An actor or task finished: free its resources."""
    return await client.remove_actor(actor_id)


@get("/placement-groups")
async def list_placement_groups(client: Client, vcluster: Vcluster = "") -> dict[str, list[str]]:
    """Placed groups: group id -> the node of each bundle."""
    return await client.placement_groups(vcluster or None)


@post("/placement-groups", status_code=200, guards=CHANGES_WITH_BODY)
async def create_placement_group(
    client: Client, data: PlacementGroupRequest, idempotency_key: IdempotencyKey = ""
) -> Placed | Pending:
    """Reserve a placement group (a PlacementGroupRequest in the bus's JSON schema), all bundles or none."""
    return await client.create_placement_group(data, command_id=idempotency_key)


@delete("/placement-groups/{pg_id:str}", status_code=200, guards=CHANGES)
async def remove_placement_group(client: Client, pg_id: str) -> Accepted:
    """Release a placement group."""
    return await client.remove_placement_group(pg_id)


@get("/pending")
async def list_pending(client: Client, vcluster: Vcluster = "") -> list[Pending]:
    """Waiting work in queue order, each with its message, reasons and the node ids behind each reason."""
    return await client.pending(vcluster or None)


cluster_router = Router(
    "/api/v1",
    route_handlers=[
        list_nodes,
        set_labels,
        list_actors,
        submit_actor,
        submit_actors,
        why,
        remove_actor,
        list_placement_groups,
        create_placement_group,
        remove_placement_group,
        list_pending,
    ],
    tags=["cluster"],
)
"""The cluster's listings and commands."""
