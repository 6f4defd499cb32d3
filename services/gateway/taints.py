"""Taints: proposal 002's dashboard calls exactly (`POST|DELETE /nodes/taints/{node_id}`), and the same under
/api/v1 by node id or by node address."""

from __future__ import annotations

from litestar import Router, delete, get, post

from schemas import Taint
from schemas.replies import Accepted
from services.client import Client
from services.gateway.errors import CHANGES_WITH_BODY
from services.gateway.parsing import removals_of, taints_of

BODY = 'A JSON object of taints: key -> value, or key -> "value:Effect" (NoSchedule by default).'
DELETE_BODY = (
    'A JSON object: key -> value deletes the taints with that key (every effect); key -> "value:Effect" or '
    '":Effect" deletes only the one with that effect.'
)


async def delete_taints_in(client: Client, node_id: str, body: dict[str, str], node_address: str = "") -> Accepted:
    """Delete the body's taints, by key or by key and effect, in one command."""
    removals = removals_of(body)
    return await client.remove_taints(
        node_id,
        [key for key, effect in removals.items() if effect is None],
        effects={key: [effect] for key, effect in removals.items() if effect is not None},
        node_address=node_address,
    )


@post("/{node_id:str}", status_code=200, guards=CHANGES_WITH_BODY, description=f"Append taints to a node. {BODY}")
async def append_taints(client: Client, node_id: str, data: dict[str, str]) -> Accepted:
    """Proposal 002: append taints."""
    return await client.add_taints(node_id, taints_of(data))


@delete(
    "/{node_id:str}",
    status_code=200,
    guards=CHANGES_WITH_BODY,
    description=f"Delete a node's taints. {DELETE_BODY}",
)
async def delete_taints(client: Client, node_id: str, data: dict[str, str]) -> Accepted:
    """Proposal 002: delete taints (by key, or by key and effect; the values are checked like an append's)."""
    return await delete_taints_in(client, node_id, data)


@post(
    "/{address:str}",
    status_code=200,
    guards=CHANGES_WITH_BODY,
    description=f"Append taints to the node at this address. {BODY}",
)
async def append_taints_by_address(client: Client, address: str, data: dict[str, str]) -> Accepted:
    """Append taints, naming the node by its address."""
    return await client.add_taints("", taints_of(data), node_address=address)


@delete(
    "/{address:str}",
    status_code=200,
    guards=CHANGES_WITH_BODY,
    description=f"Delete taints of the node at this address. {DELETE_BODY}",
)
async def delete_taints_by_address(client: Client, address: str, data: dict[str, str]) -> Accepted:
    """Delete taints, naming the node by its address."""
    return await delete_taints_in(client, "", data, node_address=address)


@get("/")
async def list_taints(client: Client, node_id: str = "") -> dict[str, list[Taint]]:
    """Taints per node (nodes without taints left out; `?node_id=` for one node)."""
    return await client.taints(node_id)


def taint_routers() -> list[Router]:
    """`/nodes/taints` (the proposal's path) and `/api/v1/taints` (by id, `/by-address/...`, and the listing)."""
    return [
        Router("/nodes/taints", route_handlers=[append_taints, delete_taints], tags=["taints"]),
        Router(
            "/api/v1/taints",
            route_handlers=[
                list_taints,
                append_taints,
                delete_taints,
                Router("/by-address", route_handlers=[append_taints_by_address, delete_taints_by_address]),
            ],
            tags=["taints"],
        ),
    ]
