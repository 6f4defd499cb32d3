"""A probe of a running mesh: does it still place a new actor?"""

from __future__ import annotations

import secrets

from schemas import ScheduleRequest
from services.cli.mesh import Mesh
from services.client import Client, CorralError


async def does_not_place(mesh: Mesh) -> str:
    """Register a fresh node and place an actor on it through the client (its label selects the node, and it
    alone tolerates the node's taint): "" when it is placed there, else what went wrong."""
    tag = secrets.token_hex(4)
    try:
        async with Client(mesh.nats_url, timeout=10.0) as client:
            # Tainted for the probe alone: forged work waiting in the queue cannot take the node first.
            await client.register_node(f"probe-{tag}", {"CPU": 2}, labels={"probe": tag}, taints={f"probe-{tag}": tag})
            probe = ScheduleRequest(
                f"probe-{tag}", {"CPU": 1}, label_selector={"probe": tag}, tolerations={f"probe-{tag}": tag}
            )
            await client.submit(probe)
            placed = await client.wait_placed(f"probe-{tag}", timeout=20.0)
    except (CorralError, TimeoutError) as error:
        return f"a new actor is not placed: {type(error).__name__}: {error}"
    return "" if placed.node_id == f"probe-{tag}" else f"the new actor went to {placed.node_id}, not probe-{tag}"
