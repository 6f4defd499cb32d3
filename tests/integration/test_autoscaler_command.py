"""The `command` provider: the launch and terminate command lines run with the launch's facts in the environment
(here two small scripts that start and stop `corral node start`); a failing launch command fails the launch."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from schemas import NodeLaunchFailed, NodesLaunchRequested, Pending, Placed, ScheduleRequest, VirtualCluster
from services.client import Client
from services.core.labels import LAUNCH_ID, NODE_TYPE
from services.local.mesh import Mesh
from tests.integration.autoscaling import (
    ACTS_WITHIN_S,
    autoscaled_mesh,
    events_of,
    launch_requests,
    node_agents,
    write_config,
)
from tests.integration.conftest import holds_within
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

SCRIPTS = Path(__file__).parent / "scripts"


def command_provider(launch: str, terminate: str) -> str:
    """The provider line of the config file."""
    return f"{{type: command, launch: '{launch}', terminate: '{terminate}'}}"


async def test_the_command_provider_launches_and_terminates_through_its_command_lines(
    tmp_path: Path, server_path: ServerPath
) -> None:
    provider = command_provider(
        f"{sys.executable} {SCRIPTS / 'launch_node.py'}", f"{sys.executable} {SCRIPTS / 'terminate_node.py'}"
    )
    config = write_config(tmp_path, provider=provider, idle=0.5)
    with node_agents(tmp_path / "nodes") as nodes_dir:
        async with autoscaled_mesh(tmp_path / "mesh", server_path, config, {"NODES_DIR": str(nodes_dir)}) as (
            _,
            client,
        ):
            await client.submit(ScheduleRequest("job", {"CPU": 1}))
            placed = await client.wait_placed("job", timeout=15.0)
            node = next(n for n in await client.nodes() if n.node_id == placed.node_id)
            launch_id = node.labels[LAUNCH_ID]
            assert (node.node_id, node.labels[NODE_TYPE], node.labels["zone"]) == (
                f"cpu-4-{launch_id}",
                "cpu-4",
                "usa-1",
            )
            await client.remove_actor("job")

            async def terminated() -> bool:
                return (nodes_dir / f"{launch_id}.terminated").exists() and not await live(client, node.node_id)

            assert await holds_within(terminated, timeout=ACTS_WITHIN_S)
            assert (nodes_dir / f"{launch_id}.terminated").read_text() == node.node_id


async def live(client: Client, node_id: str) -> bool:
    """Whether the node is live."""
    return node_id in {node.node_id for node in await client.nodes()}


async def first_launch_failure(mesh: Mesh) -> NodeLaunchFailed:
    """The log's first `NodeLaunchFailed`, once there is one (within 10 s)."""

    async def failed() -> bool:
        return any(isinstance(event, NodeLaunchFailed) for event in await events_of(mesh))

    assert await holds_within(failed, timeout=ACTS_WITHIN_S), "no launch failed"
    return next(event for event in await events_of(mesh) if isinstance(event, NodeLaunchFailed))


async def test_a_failing_launch_command_fails_the_launch_and_backs_its_type_off(
    tmp_path: Path, server_path: ServerPath
) -> None:
    config = write_config(tmp_path, provider=command_provider("echo no capacity; exit 3", "true"), launch_timeout=30)
    async with autoscaled_mesh(tmp_path / "mesh", server_path, config) as (mesh, client):
        await client.submit(ScheduleRequest("job", {"CPU": 1}))

        failure = await first_launch_failure(mesh)
        assert failure.reason == "the launch command exited with code 3: no capacity"

        async def backed_off() -> bool:
            cpu = next(t for t in (await client.autoscaler_status()).node_types if t.name == "cpu-4")
            return cpu.launching == 0 and cpu.backed_off_until > failure.failed_at

        assert await holds_within(backed_off, timeout=ACTS_WITHIN_S)
        launched = [request.node_type for request in launch_requests(await events_of(mesh))]
        assert launched.count("cpu-4") == 1  # backed off: the next try is another type that can host the work


async def test_a_launch_that_never_registers_fails_after_the_launch_timeout(
    tmp_path: Path, server_path: ServerPath
) -> None:
    config = write_config(tmp_path, provider=command_provider("true", "true"), launch_timeout=1)
    async with autoscaled_mesh(tmp_path / "mesh", server_path, config) as (mesh, client):
        await client.submit(ScheduleRequest("job", {"CPU": 1}))

        failure = await first_launch_failure(mesh)
        assert (failure.launch_id, failure.reason) == ("L1", "not registered within launch_timeout_s (1s)")


@pytest.mark.parametrize("vcluster", ["", "team"], ids=["at the root", "inside a virtual cluster"])
async def test_each_actor_lands_on_the_node_launched_for_it_whatever_registers_first(
    tmp_path: Path, server_path: ServerPath, vcluster: str
) -> None:
    """Two launches of different types register at different times (here the test registers them, as a cloud would
    whenever its machines come up): the first node to register takes only the work it was launched for, and the
    other actor waits for its own node (inside a virtual cluster: the cluster grows there for it)."""
    config = write_config(tmp_path, provider=command_provider("true", "true"), launch_timeout=60)
    async with autoscaled_mesh(tmp_path / "mesh", server_path, config) as (mesh, client):

        async def launched(count: int) -> bool:
            return len(launch_requests(await events_of(mesh))) == count

        if vcluster:
            await client.create_virtual_cluster(vcluster, VirtualCluster(flexible_resource_max={"CPU": 8}))
        await client.submit(ScheduleRequest("small", {"CPU": 1}, vcluster_id=vcluster or None))
        assert await holds_within(lambda: launched(1), timeout=ACTS_WITHIN_S)
        await client.submit(ScheduleRequest("big", {"CPU": 12}))  # after: one round for both would plan one cpu-16
        assert await holds_within(lambda: launched(2), timeout=ACTS_WITHIN_S)
        launches = {r.node_type: r for r in launch_requests(await events_of(mesh))}
        assert {name: r.work for name, r in launches.items()} == {"cpu-4": ["small"], "cpu-16": ["big"]}
        big_node = await register_launched(client, launches["cpu-16"], {"CPU": 16}, {"type": "16c32g", "zone": "usa-2"})
        assert (await client.wait_placed("big", timeout=ACTS_WITHIN_S)).node_id == big_node
        assert not isinstance(await client.decision("small"), Placed)
        small_node = await register_launched(client, launches["cpu-4"], {"CPU": 4}, {"type": "4c8g", "zone": "usa-1"})
        expected = f"{vcluster}-flex-{small_node}" if vcluster else small_node
        assert (await client.wait_placed("small", timeout=ACTS_WITHIN_S)).node_id == expected


async def test_an_actor_launched_for_keeps_its_share_of_its_clusters_maximum_from_an_earlier_actor(
    tmp_path: Path, server_path: ServerPath
) -> None:
    """A cluster that may borrow 3 CPUs; a node launched for its 2-CPU actor `late`; its other 2-CPU actor `early`
    (no launch: the maximum leaves it 1 CPU) does not take `late`'s share when a plain node comes first, and `late`
    grows the cluster on its own node once that registers."""
    config = write_config(tmp_path, provider=command_provider("true", "true"), launch_timeout=60)
    async with autoscaled_mesh(tmp_path / "mesh", server_path, config) as (mesh, client):
        await client.create_virtual_cluster("team", VirtualCluster(flexible_resource_max={"CPU": 3}))
        await client.submit(ScheduleRequest("late", {"CPU": 2}, label_selector={"type": "4c8g"}, vcluster_id="team"))

        async def launched() -> bool:
            return len(launch_requests(await events_of(mesh))) == 1

        assert await holds_within(launched, timeout=ACTS_WITHIN_S)
        await client.submit(ScheduleRequest("early", {"CPU": 2}, vcluster_id="team"))
        await client.register_node("plain", {"CPU": 4})

        async def kept() -> bool:
            decision = await client.decision("early")
            return isinstance(decision, Pending) and "2 more kept for work a launch was for" in decision.message

        assert await holds_within(kept, timeout=ACTS_WITHIN_S)
        (request,) = launch_requests(await events_of(mesh))
        node_id = await register_launched(client, request, {"CPU": 4}, {"type": "4c8g", "zone": "usa-1"})
        assert (await client.wait_placed("late", timeout=ACTS_WITHIN_S)).node_id == f"team-flex-{node_id}"
        assert not isinstance(await client.decision("early"), Placed)
        assert [request.work for request in launch_requests(await events_of(mesh))] == [["late"]]


async def register_launched(
    client: Client, request: NodesLaunchRequested, resources: dict[str, float], labels: dict[str, str]
) -> str:
    """Register the node of a launch request's one launch, as `corral node start` does for a launched node."""
    (launch_id,) = request.launch_ids
    node_id = f"{request.node_type}-{launch_id}"
    await client.register_node(node_id, resources, labels, node_type=request.node_type, launch_id=launch_id)
    return node_id
