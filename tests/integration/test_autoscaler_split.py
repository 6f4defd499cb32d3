"""A round that launches for more work than one message holds, through the bus: its decision is split into events
each under the message limit, every launch is recorded and folded by every reader, every node registers and every
piece of work is placed on the nodes launched for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from schemas import LaunchesNominated, NodesLaunchRequested, ScheduleRequest
from services.client import Client
from services.core.labels import LAUNCH_ID
from services.local.mesh import SERVICES
from services.runtime.bus import Bus
from services.runtime.codec import encode
from services.runtime.settings import Settings
from tests.integration.autoscaling import FAST_AUTOSCALER, events_of, write_config
from tests.integration.conftest import start_test_mesh, wait_ready
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

MESSAGE_LIMIT = 4096
"""`CORRAL_MAX_MESSAGE_BYTES` here: 20 pieces of work with ids of 200 characters take about 9 KB in one event (the
16 the plan puts on one cpu-16 node about 7 KB)."""
ACTORS = [f"{k:02d}-" + "w" * 197 for k in range(20)]


async def test_a_launch_for_more_work_than_one_message_holds_is_recorded_whole_and_every_node_registers(
    tmp_path: Path, server_path: ServerPath
) -> None:
    env = {
        **FAST_AUTOSCALER,
        "CORRAL_AUTOSCALER_CONFIG": str(write_config(tmp_path)),
        "CORRAL_MAX_MESSAGE_BYTES": str(MESSAGE_LIMIT),
    }
    mesh = start_test_mesh(tmp_path / "mesh", server_path, SERVICES, env)
    try:
        async with Client(mesh.nats_url, timeout=10.0) as client:
            await wait_ready(client)
            for actor_id in ACTORS:  # all pending before the autoscaler's first round: one round launches for all
                await client.submit(ScheduleRequest(actor_id, {"CPU": 1}))
            mesh.start_service("autoscaler")
            await client.wait_autoscaler(timeout=15.0)
            placed = {actor_id: (await client.wait_placed(actor_id, timeout=15.0)).node_id or "" for actor_id in ACTORS}
            launch_of = {node.node_id: node.labels.get(LAUNCH_ID, "") for node in await client.nodes()}
            status = await client.autoscaler_status()
        events = await events_of(mesh)
        decisions = [event for event in events if isinstance(event, NodesLaunchRequested | LaunchesNominated)]
        requested = [event for event in decisions if isinstance(event, NodesLaunchRequested)]
        launch_ids = [launch_id for event in requested for launch_id in event.launch_ids]
        assert len(decisions) > len({event.node_type for event in requested})  # some type's launch took several
        assert len(launch_ids) == len(set(launch_ids))
        assert all(len(encode(event)) <= MESSAGE_LIMIT for event in decisions)
        assert {launch_of[node_id] for node_id in placed.values()} == set(launch_ids)
        assert sorted(launch.launch_id for launch in status.launches if launch.state == "registered") == sorted(
            launch_ids
        )
        nominated = {work_id for event in decisions for put in event.nominated.values() for work_id in put}
        assert nominated == set(ACTORS)
        bus = await Bus.connect(Settings.from_env(mesh.env), "test-reader")
        try:
            assert [await bus.last_dead_event(name) for name in ("scheduler", "autoscaler")] == [(0, 0), (0, 0)]
        finally:
            await bus.close()
    finally:
        mesh.close()
