"""The autoscaler launches what the scheduler's own rules need: distinct nodes for a STRICT_SPREAD group, the type
a fallback selector names, no more than a virtual cluster may borrow, a node for a cluster queued under another
(its parent grows onto it), nothing a type cannot host (and says why)."""

from __future__ import annotations

from pathlib import Path

import pytest

from schemas import (
    Exists,
    NodeDrainStarted,
    Placed,
    PlacementGroupRequest,
    Queued,
    ScheduleRequest,
    VirtualCluster,
)
from tests.integration.autoscaling import ACTS_WITHIN_S, autoscaled_mesh, events_of, launch_requests, write_config
from tests.integration.conftest import holds_within
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_a_strict_spread_group_of_three_gets_three_new_nodes(tmp_path: Path, server_path: ServerPath) -> None:
    async with autoscaled_mesh(tmp_path / "mesh", server_path, write_config(tmp_path)) as (mesh, client):
        group = PlacementGroupRequest("spread", [{"CPU": 2}] * 3, strategy="STRICT_SPREAD")
        assert not isinstance(await client.create_placement_group(group), Placed)

        async def placed() -> bool:
            return "spread" in await client.placement_groups()

        assert await holds_within(placed, timeout=ACTS_WITHIN_S)
        nodes = (await client.placement_groups())["spread"]
        assert len(set(nodes)) == 3
        launched = [launch_id for r in launch_requests(await events_of(mesh)) for launch_id in r.launch_ids]
        assert len(launched) == 3 and sorted(nodes) == sorted(f"cpu-4-{launch_id}" for launch_id in launched)


async def test_a_fallback_selector_gets_the_type_it_names_when_no_type_matches_the_first(
    tmp_path: Path, server_path: ServerPath
) -> None:
    async with autoscaled_mesh(tmp_path / "mesh", server_path, write_config(tmp_path)) as (mesh, client):
        request = ScheduleRequest(
            "etl",
            {"CPU": 2},
            label_selector={"zone": "usa-9"},
            fallback_strategy=[{"label_selector": {"zone": "usa-2"}}],
        )
        await client.submit(request)
        placed = await client.wait_placed("etl", timeout=ACTS_WITHIN_S)
        assert placed.node_id is not None and placed.node_id.startswith("cpu-16-")
        assert [r.node_type for r in launch_requests(await events_of(mesh))] == ["cpu-16"]


async def test_demand_inside_a_virtual_cluster_launches_only_what_the_cluster_may_borrow(
    tmp_path: Path, server_path: ServerPath
) -> None:
    async with autoscaled_mesh(tmp_path / "mesh", server_path, write_config(tmp_path)) as (mesh, client):
        await client.create_virtual_cluster("team", VirtualCluster(flexible_resource_max={"CPU": 2}))
        for index in range(4):
            await client.submit(ScheduleRequest(f"w{index}", {"CPU": 1}, vcluster_id="team"))

        async def two_placed() -> bool:
            return len(await client.placements(vcluster_id="team")) == 2

        assert await holds_within(two_placed, timeout=ACTS_WITHIN_S)
        status = await client.autoscaler_status()
        waiting = [group for group in status.demand if "w2" in group.work or "w3" in group.work]
        assert waiting and "may borrow only" in waiting[0].shape
        requests = launch_requests(await events_of(mesh))
        assert [(r.node_type, len(r.launch_ids)) for r in requests] == [("cpu-4", 1)]


async def test_a_nested_cluster_queued_for_its_parents_room_gets_a_node_and_is_admitted(
    tmp_path: Path, server_path: ServerPath
) -> None:
    async with autoscaled_mesh(tmp_path / "mesh", server_path, write_config(tmp_path)) as (mesh, client):
        await client.create_virtual_cluster("team", VirtualCluster(flexible_resource_max={"CPU": 8}))
        spec = VirtualCluster(flexible_resource_min={"CPU": 3}, flexible_resource_max={"CPU": 3})
        assert isinstance(await client.create_virtual_cluster("squad", spec, parent="team"), Queued)

        async def admitted() -> bool:
            return (await client.virtual_cluster("squad")).state == "admitted"

        assert await holds_within(admitted, timeout=ACTS_WITHIN_S)
        assert (await client.virtual_cluster("squad")).total_resources == {"CPU": 3.0}
        requests = launch_requests(await events_of(mesh))
        assert [(r.node_type, len(r.launch_ids), r.work) for r in requests] == [("cpu-4", 1, ["squad"])]


async def test_work_no_type_can_host_is_explained_per_type(tmp_path: Path, server_path: ServerPath) -> None:
    async with autoscaled_mesh(tmp_path / "mesh", server_path, write_config(tmp_path)) as (mesh, client):
        await client.submit(ScheduleRequest("odd", {"CPU": 1}, label_selector={"rack": "r9"}))

        async def explained() -> bool:
            return "no node type can host it" in (await client.autoscaler_why("odd")).message

        assert await holds_within(explained, timeout=ACTS_WITHIN_S)
        message = (await client.autoscaler_why("odd")).message
        assert all(name in message for name in ("cpu-4", "cpu-16", "gpu-a100")), message
        assert launch_requests(await events_of(mesh)) == []


async def test_work_beyond_a_types_max_workers_waits_and_why_says_so(tmp_path: Path, server_path: ServerPath) -> None:
    async with autoscaled_mesh(tmp_path / "mesh", server_path, write_config(tmp_path)) as (mesh, client):
        for index in range(3):
            request = ScheduleRequest(f"big{index}", {"GPU": 4}, tolerations={"gpu_node": Exists()})
            await client.submit(request)

        async def two_placed() -> bool:
            return len(await client.placements()) == 2

        assert await holds_within(two_placed, timeout=ACTS_WITHIN_S)
        waiting = next(item.id for item in await client.pending())

        async def at_max() -> bool:
            return "gpu-a100 is at max_workers (2)" in (await client.autoscaler_why(waiting)).message

        assert await holds_within(at_max, timeout=ACTS_WITHIN_S)
        launched = [launch_id for r in launch_requests(await events_of(mesh)) for launch_id in r.launch_ids]
        assert len(launched) == 2


async def test_min_workers_are_launched_without_demand_and_never_scaled_down(
    tmp_path: Path, server_path: ServerPath
) -> None:
    config = tmp_path / "min.yaml"
    config.write_text(
        "idle_timeout_s: 0.5\nnode_types:\n  cpu-4:\n    resources: {CPU: 4}\n    min_workers: 1\n    max_workers: 3\n"
    )
    async with autoscaled_mesh(tmp_path / "mesh", server_path, config) as (mesh, client):

        async def kept() -> bool:
            return [n.node_id for n in await client.nodes()] == ["cpu-4-L1"]

        assert await holds_within(kept, timeout=ACTS_WITHIN_S)
        for name in ("big", "bigger"):  # one takes the minimum's node, the other gets a node launched
            await client.submit(ScheduleRequest(name, {"CPU": 4}))
        placed = [await client.wait_placed(name, timeout=ACTS_WITHIN_S) for name in ("big", "bigger")]
        assert sorted(p.node_id or "" for p in placed) == ["cpu-4-L1", "cpu-4-L2"]
        for name in ("big", "bigger"):  # removed once both hold a node: a removal first would free L1 for the other
            await client.remove_actor(name)

        async def one_terminated() -> bool:
            return len((await client.autoscaler_status()).terminations) == 1

        assert await holds_within(one_terminated, timeout=ACTS_WITHIN_S)
        events = await events_of(mesh)
        assert [r.reason for r in launch_requests(events)] == ["min_workers 1", "pending work (1)"]
        assert len([e for e in events if isinstance(e, NodeDrainStarted)]) == 1
        assert len(await client.nodes()) == 1
