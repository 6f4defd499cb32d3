"""Every proposal end to end through the bus: labels, affinity, taints, DataFlow, placement groups, node death."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from schemas import (
    ActorAffinityMatchExpression,
    ActorAffinityOperator,
    ActorAffinitySchedulingStrategy,
    Pending,
    Placed,
    PlacementGroupRequest,
    PlacementGroupSchedulingStrategy,
    RunAfter,
    ScheduleRequest,
    Taint,
)
from services.client import Client, NotFoundError, RejectedError
from services.local.mesh import Mesh
from tests.integration.conftest import holds_within, start_test_mesh
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory, server_path: ServerPath) -> Iterator[Mesh]:
    """One mesh for the tests whose work goes where its own labels, affinity or zone say (each uses its own ids);
    a test that needs its node to be the only one with room, or counts the live nodes, has a mesh of its own
    (`fresh_mesh`)."""
    running = start_test_mesh(tmp_path_factory.mktemp("proposals") / "mesh", server_path)
    try:
        yield running
    finally:
        running.close()


def near(key: str, value: str, operator: str = "IN") -> ActorAffinitySchedulingStrategy:
    """An actor-affinity strategy with one hard expression on the node."""
    expression = ActorAffinityMatchExpression(key, ActorAffinityOperator(operator), [value])
    return ActorAffinitySchedulingStrategy([expression])


async def test_label_selectors_and_fallbacks_choose_nodes_by_label(client: Client) -> None:
    """Proposal 001: a selector picks the ssd node; an impossible selector falls back; queries find by label."""
    await client.register_node("ssd", {"CPU": 2}, labels={"disk": "ssd"})
    await client.register_node("hdd", {"CPU": 2}, labels={"disk": "hdd"})
    placed = await client.submit(ScheduleRequest("a", {"CPU": 1}, label_selector={"disk": "ssd"}))
    assert placed == Placed("a", "ssd")
    fallback = ScheduleRequest(
        "b", {"CPU": 1}, label_selector={"disk": "nvme"}, fallback_strategy=[{"label_selector": {"disk": "hdd"}}]
    )
    assert await client.submit(fallback) == Placed("b", "hdd")
    assert [n.node_id for n in await client.nodes({"disk": "ssd"})] == ["ssd"]


async def test_actor_affinity_follows_and_avoids_labelled_actors(client: Client) -> None:
    """Proposal 000: affinity joins the cache's node, anti-affinity avoids it; the actor-label index answers."""
    await client.register_node("affinity-n1", {"CPU": 4})
    await client.register_node("affinity-n2", {"CPU": 4})
    cache = await client.submit(ScheduleRequest("cache", {"CPU": 1}, labels={"app": "cache"}))
    assert isinstance(cache, Placed)
    with_it = await client.submit(ScheduleRequest("web", {"CPU": 1}, scheduling_strategy=near("app", "cache")))
    away = await client.submit(ScheduleRequest("batch", {"CPU": 1}, scheduling_strategy=near("app", "cache", "NOT_IN")))
    assert isinstance(with_it, Placed) and with_it.node_id == cache.node_id
    assert isinstance(away, Placed) and away.node_id != cache.node_id
    assert [a.actor_id for a in await client.actors({"app": "cache"})] == ["cache"]


async def test_taints_keep_work_off_and_a_removed_taint_unblocks_it(fresh_client: Client) -> None:
    """Proposal 002: a NoSchedule taint blocks, why names the node, removing the taint places the actor."""
    await fresh_client.register_node("gpu1", {"CPU": 2}, taints={"gpu": "true"})
    pending = await fresh_client.submit(ScheduleRequest("a", {"CPU": 1}))
    assert isinstance(pending, Pending)
    why = await fresh_client.why("a")
    assert isinstance(why, Pending) and why.nodes_by_reason == {"had untolerated taint {gpu: true}": ["gpu1"]}
    tolerant = await fresh_client.submit(ScheduleRequest("b", {"CPU": 1}, tolerations={"gpu": "true"}))
    assert tolerant == Placed("b", "gpu1")
    await fresh_client.remove_taints("gpu1", ["gpu"])
    assert (await fresh_client.wait_placed("a", timeout=5)).node_id == "gpu1"


async def test_a_taint_removed_by_key_and_effect_leaves_the_keys_other_effects(fresh_client: Client) -> None:
    """`kubectl taint node N key:Effect-`: one command, one change; an effect the key lacks is not found and changes
    nothing."""
    both = [Taint("gpu", "true", "NoSchedule"), Taint("gpu", "true", "PreferNoSchedule")]
    await fresh_client.register_node("gpu2", {"CPU": 2}, taints=both)
    with pytest.raises(NotFoundError, match="taint gpu:NoExecute not found on node gpu2"):
        await fresh_client.remove_taints("gpu2", [], effects={"gpu": ["NoExecute"]})
    with pytest.raises(RejectedError, match=r"Invalid enum value 'NoWay' - at `\$\.effects"):
        await fresh_client.remove_taints("gpu2", [], effects={"gpu": ["NoWay"]})  # type: ignore[list-item]
    removed = await fresh_client.remove_taints("gpu2", [], effects={"gpu": ["NoSchedule"]})
    assert removed.sequence > 0
    (node,) = await fresh_client.nodes()
    assert node.taints == [both[1]]
    assert await fresh_client.submit(ScheduleRequest("a", {"CPU": 1})) == Placed("a", "gpu2")


async def moved_to(client: Client, actor_id: str, node_id: str, timeout: float = 5.0) -> bool:
    """Whether the actor is placed on `node_id` within `timeout` (it may still be on its old node at first: the
    scheduler reacts to the taint or the death a moment after the command that caused it returned)."""

    async def placed_there() -> bool:
        decision = await client.decision(actor_id)
        return isinstance(decision, Placed) and decision.node_id == node_id

    return await holds_within(placed_there, timeout)


async def test_a_no_execute_taint_evicts_and_the_actor_restarts_elsewhere(fresh_client: Client) -> None:
    """Proposal 002: NoExecute on its node evicts an untolerating actor; with a restart left it moves."""
    await fresh_client.register_node("n1", {"CPU": 1})
    await fresh_client.submit(ScheduleRequest("a", {"CPU": 1}, max_restarts=1))
    await fresh_client.register_node("n2", {"CPU": 1})
    await fresh_client.add_taints("n1", [Taint("maintenance", "", "NoExecute")])
    assert await moved_to(fresh_client, "a", "n2")


async def test_dataflow_runs_after_an_operation_in_its_zone(client: Client) -> None:
    """Proposal 003: RunAfter Require places the consumer in the producer's zone."""
    for index, zone in enumerate(["flow-z1", "flow-z2", "flow-z2"]):
        await client.register_node(f"flow-n{index}", {"CPU": 2}, zone=zone)
    producer = await client.submit(ScheduleRequest("read", {"CPU": 1}, label_selector={"corral.io/node-id": "flow-n0"}))
    assert producer == Placed("read", "flow-n0")
    run_after = RunAfter("read", "Require", ["corral.io/availability-zone"])
    consumer = await client.submit(ScheduleRequest("map", {"CPU": 1}, run_after=run_after))
    assert consumer == Placed("map", "flow-n0")


async def test_a_placement_group_reserves_all_bundles_and_actors_run_inside(fresh_client: Client) -> None:
    """Placement groups: STRICT_SPREAD over two nodes, an actor in bundle 1 lands on that bundle's node."""
    await fresh_client.register_node("n1", {"CPU": 2})
    await fresh_client.register_node("n2", {"CPU": 2})
    group = await fresh_client.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 1}] * 2, "STRICT_SPREAD"))
    assert isinstance(group, Placed) and sorted(group.bundle_nodes) == ["n1", "n2"]
    inside = ScheduleRequest("w", {"CPU": 1}, scheduling_strategy=PlacementGroupSchedulingStrategy("pg", 1))
    assert await fresh_client.submit(inside) == Placed("w", group.bundle_nodes[1], bundle_index=1)


async def test_a_node_that_stops_heartbeating_dies_and_its_actors_recollocate(fresh_client: Client) -> None:
    """Missed heartbeats: the node is declared dead; an actor with restarts follows its peer's label."""
    await fresh_client.register_node("keep", {"CPU": 2}, labels={"pool": "a"})
    await fresh_client.register_node("silent", {"CPU": 2}, labels={"pool": "a"}, heartbeat=False)
    await fresh_client.submit(ScheduleRequest("x", {"CPU": 2}, label_selector={"corral.io/node-id": "keep"}))
    moving = ScheduleRequest("y", {"CPU": 1}, label_selector={"pool": "a"}, max_restarts=1)
    assert await fresh_client.submit(moving) == Placed("y", "silent")
    await fresh_client.remove_actor("x")

    async def only_keep_lives() -> bool:
        return [n.node_id for n in await fresh_client.nodes()] == ["keep"]

    assert await holds_within(only_keep_lives, timeout=10), "the silent node is declared dead"
    assert await moved_to(fresh_client, "y", "keep")


async def test_a_reconnecting_agent_resumes_its_node_with_its_actors(fresh_client: Client) -> None:
    """Registering again with the same id and resources resumes the node; different resources are refused."""
    await fresh_client.register_node("n1", {"CPU": 2})
    await fresh_client.submit(ScheduleRequest("a", {"CPU": 1}))
    resumed = await fresh_client.register_node("n1", {"CPU": 2})
    assert "resumed with 1 actor" in resumed.message
    assert await fresh_client.placements() == {"a": "n1"}
    with pytest.raises(ValueError, match="already registered"):
        await fresh_client.register_node("n1", {"CPU": 8})
