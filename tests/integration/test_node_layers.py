"""An operator's labels and taints hold when the node's agent registers again, and through restarts of every
service (from snapshots, and by a full replay); `corral node remove` of a node whose agent still runs says so, and
the agent's return is an event that says it came back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis.asyncio as redis

from schemas import Taint
from schemas.queries import NodeInfo
from services.client import Client
from services.core.labels import SCALE_DOWN_TAINT, user_labels
from services.local.mesh import SERVICES, Mesh
from tests.integration.conftest import corral, holds_within, log_of, start_test_mesh, wait_ready
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory, server_path: ServerPath) -> Iterator[Mesh]:
    """One mesh for this module's tests that leave the services running (each uses its own node); the two that
    restart every service have a mesh of their own (`fresh_mesh`)."""
    running = start_test_mesh(tmp_path_factory.mktemp("node-layers") / "mesh", server_path)
    try:
        yield running
    finally:
        running.close()


TEAM = Taint("team", "ml", "NoSchedule")
SCALE_DOWN = Taint(SCALE_DOWN_TAINT, "true", "NoSchedule")
AGENT_TAINT = Taint("disk", "slow", "PreferNoSchedule")
OPERATED = {"disk": "nvme", "owner": "alice"}
"""n2's user labels once the operator's edits lie over its agent's second declaration."""


async def node(client: Client, node_id: str) -> NodeInfo | None:
    """The live node as the labels service answers it."""
    return next((found for found in await client.nodes() if found.node_id == node_id), None)


async def scheduler_node(client: Client, node_id: str) -> NodeInfo | None:
    """The live node as the scheduler sees it."""
    return next((found for found in (await client.status()).nodes if found.node_id == node_id), None)


async def operated_and_back(client: Client, mesh: Mesh) -> None:
    """n2 registered by an agent, labelled, unlabelled and tainted by an operator (the CLI), tainted for scale-down
    as the autoscaler does, dead by missed heartbeats, then registered again with other labels."""
    async with Client(mesh.nats_url, timeout=10.0) as agent:
        await agent.register_node("n2", {"CPU": 4}, {"disk": "ssd", "rack": "r1"}, [AGENT_TAINT])
        for words in (["label", "node", "n2", "owner=alice", "rack-"], ["taint", "node", "n2", "team=ml:NoSchedule"]):
            done = await corral(mesh, *words)
            assert done.returncode == 0, done.stderr
        await client.add_taints("n2", [SCALE_DOWN])
    assert await holds_within(lambda: absent(client, "n2"), timeout=10)
    await client.register_node("n2", {"CPU": 4}, {"disk": "nvme", "rack": "r1"}, [AGENT_TAINT])


async def absent(client: Client, node_id: str) -> bool:
    return await node(client, node_id) is None


def operated(found: NodeInfo | None) -> bool:
    """Whether n2 carries the operator's edits over its agent's second declaration."""
    taints = {AGENT_TAINT, TEAM, SCALE_DOWN}
    return found is not None and user_labels(found.labels) == OPERATED and set(found.taints) == taints


async def every_view_operated(client: Client) -> bool:
    """Whether the labels service, the scheduler and the taints service all see n2 with the operator's edits (each
    folds the log on its own: the scheduler and the taints service a moment after the labels service answers)."""
    taints = (await client.taints("n2")).get("n2", [])
    return (
        operated(await node(client, "n2"))
        and operated(await scheduler_node(client, "n2"))
        and set(taints) == {AGENT_TAINT, TEAM, SCALE_DOWN}
    )


async def test_an_operators_labels_and_taints_survive_the_agents_return_and_restarts(
    fresh_client: Client, fresh_mesh: Mesh
) -> None:
    await operated_and_back(fresh_client, fresh_mesh)
    found = await node(fresh_client, "n2")
    assert operated(found)
    assert found is not None and found.layers is not None
    assert found.layers.operator_labels.removed == ["rack"]
    assert set(found.layers.operator_taints.taints) == {TEAM, SCALE_DOWN}
    assert await holds_within(lambda: every_view_operated(fresh_client), timeout=10)
    for service in SERVICES:  # each saves its snapshot as it stops
        fresh_mesh.stop_service(service)
    for service in SERVICES:
        fresh_mesh.start_service(service)
    await wait_ready(fresh_client)
    assert "snapshot at sequence" in log_of(fresh_mesh, "labels")
    assert await holds_within(lambda: every_view_operated(fresh_client), timeout=10)


async def test_a_full_replay_gives_the_operators_edits_back(fresh_client: Client, fresh_mesh: Mesh) -> None:
    await operated_and_back(fresh_client, fresh_mesh)
    for service in SERVICES:
        fresh_mesh.stop_service(service)
    async with redis.Redis(port=fresh_mesh.redis.port) as store:
        await store.flushall()
    for service in SERVICES:
        fresh_mesh.start_service(service)
    await wait_ready(fresh_client)
    assert "no snapshot of labels: replaying the whole log" in log_of(fresh_mesh, "labels")
    assert await holds_within(lambda: every_view_operated(fresh_client), timeout=10)


async def test_describe_and_get_show_where_each_label_and_taint_comes_from(client: Client, mesh: Mesh) -> None:
    await operated_and_back(client, mesh)
    described = await corral(mesh, "describe", "node", "n2")
    assert described.returncode == 0, described.stderr
    assert "owner=alice (operator)" in described.stdout
    assert "disk=nvme (agent)" in described.stdout
    assert "rack- (operator removed the agent's rack=r1)" in described.stdout
    assert "team=ml:NoSchedule (operator)" in described.stdout
    listed = await corral(mesh, "get", "nodes", "-o", "yaml")
    assert listed.returncode == 0, listed.stderr
    assert "operator_labels:" in listed.stdout and "owner: alice" in listed.stdout


async def test_removing_a_node_whose_agent_runs_says_so_and_its_return_says_it_came_back(
    client: Client, mesh: Mesh
) -> None:
    async with Client(mesh.nats_url, timeout=10.0) as agent:
        await agent.register_node("n4", {"CPU": 4})
        await client.add_taints("n4", [TEAM])
        removed = await corral(mesh, "node", "remove", "n4")
        assert removed.returncode == 0, removed.stderr
        assert "node n4 removed, but its agent was heard from" in removed.stdout
        assert "corral cordon n4" in removed.stdout and "stop its agent" in removed.stdout
        assert await holds_within(lambda: present(client, "n4"), timeout=10)
    back = await node(client, "n4")
    assert back is not None and TEAM not in back.taints  # a removal forgets the operator's edits
    events = await corral(mesh, "events", "--node", "n4")
    assert "node n4 removed (the operator's labels and taints forgotten)" in events.stdout
    assert "node n4 registered again (it was removed " in events.stdout


async def present(client: Client, node_id: str) -> bool:
    return await node(client, node_id) is not None
