"""The autoscaler through the bus, with the `local` provider: it launches the nodes pending work needs (by
Corral's own rules), scales idle nodes down through the scale-down taint, and resumes after a kill -9."""

from __future__ import annotations

from pathlib import Path

import pytest

from schemas import Exists, Placed, ScheduleRequest
from services.core.labels import LAUNCH_ID, NODE_TYPE
from services.testing.servers import ServerPath
from tests.integration.autoscaling import autoscaled_mesh, events_of, launch_requests, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_a_tolerated_gpu_actor_gets_a_gpu_node_launched_and_placed_on_it(
    tmp_path: Path, server_path: ServerPath
) -> None:
    config = write_config(tmp_path)
    async with autoscaled_mesh(tmp_path / "mesh", server_path, config) as (mesh, client):
        trainer = ScheduleRequest("trainer", {"GPU": 1}, tolerations={"gpu_node": Exists()})
        assert not isinstance(await client.submit(trainer), Placed)
        placed = await client.wait_placed("trainer", timeout=10.0)
        node = next(n for n in await client.nodes() if n.node_id == placed.node_id)
        assert node.labels[NODE_TYPE] == "gpu-a100" and node.labels[LAUNCH_ID]
        requests = launch_requests(await events_of(mesh))
        assert [(r.node_type, len(r.launch_ids), r.work) for r in requests] == [("gpu-a100", 1, ["trainer"])]
        status = await client.autoscaler_status()
        gpu = next(t for t in status.node_types if t.name == "gpu-a100")
        assert (gpu.running, gpu.launching) == (1, 0)
        assert status.launches[0].state == "registered"
