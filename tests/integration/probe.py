"""What the fuzz suites share: hypothesis settings for examples that change one live mesh, and a probe of
whether the mesh still places a new actor."""

from __future__ import annotations

import secrets

from hypothesis import HealthCheck, Phase, settings

from schemas import ScheduleRequest
from services.cli.mesh import Mesh
from services.client import Client, CorralError


def on_one_mesh(examples: int) -> settings:
    """Settings for `examples` examples sent to one live mesh: never shrunk nor replayed from a database (each
    example changes the mesh, so a shrunk one would meet another mesh), no deadline, no health checks."""
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=(Phase.explicit, Phase.generate),
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )


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
