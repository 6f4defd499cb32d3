"""Virtual clusters end to end: the vclusters service validates and answers, the scheduler admits and reserves."""

from __future__ import annotations

import pytest

from schemas import (
    Admitted,
    Destroyed,
    FixedSizeNode,
    FixedSizeNodes,
    In,
    Pending,
    Placed,
    PlacementGroupRequest,
    PlacementGroupSchedulingStrategy,
    Queued,
    ScheduleRequest,
    VirtualCluster,
    VirtualClusterRequested,
)
from services.client import Client, NotFoundError, RejectedError, SyncClient
from services.local.mesh import Mesh
from tests.integration.conftest import holds_within, log_of, wait_ready
from tests.integration.log import read_events
from tests.integration.test_restart_and_snapshots import full_replay_digest, service_digest

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def cpus(*amounts: float, policy: str = "PACK") -> VirtualCluster:
    """A spec of fixed-size nodes with these CPU counts, placed by `policy`."""
    group = FixedSizeNodes([FixedSizeNode({"CPU": amount}) for amount in amounts], policy)  # type: ignore[arg-type]
    return VirtualCluster(fixed_size_nodes=[group])


def flexible(minimum: float, maximum: float | None = None) -> VirtualCluster:
    """A spec of flexible CPUs only, between `minimum` and `maximum` (unbounded when None)."""
    return VirtualCluster(
        flexible_resource_min={"CPU": minimum}, flexible_resource_max={} if maximum is None else {"CPU": maximum}
    )


@pytest.fixture
def vc(client: Client) -> Client:
    """A client of a mesh whose services (vclusters included) all answer."""
    return client


async def test_admission_reserves_strict_spread_nodes_and_the_third_task_waits(vc: Client) -> None:
    """The proposal's walk-through: 2 x 1 CPU STRICT_SPREAD, two tasks on the virtual nodes, the third waits."""
    for node_id in ("n1", "n2", "n3"):
        await vc.register_node(node_id, {"CPU": 4})
    admitted = await vc.create_virtual_cluster("vc1", cpus(1, 1, policy="STRICT_SPREAD"))
    assert isinstance(admitted, Admitted) and len(admitted.vnode_ids) == 2
    info = await vc.virtual_cluster("vc1")
    assert info.state == "admitted" and info.total_resources == {"CPU": 2.0}
    assert len({node.parent_node for node in info.nodes}) == 2
    first = await vc.submit(ScheduleRequest("t1", {"CPU": 1}, vcluster_id="vc1"))
    second = await vc.submit(ScheduleRequest("t2", {"CPU": 1}, vcluster_id="vc1"))
    assert isinstance(first, Placed) and isinstance(second, Placed)
    assert {first.node_id, second.node_id} == set(admitted.vnode_ids)
    assert await vc.placements(vcluster_id="vc1") == {"t1": first.node_id, "t2": second.node_id}
    third = await vc.submit(ScheduleRequest("t3", {"CPU": 1}, vcluster_id="vc1"))
    assert isinstance(third, Pending)
    assert "0/2 nodes of virtual cluster vc1 are available: 2 node(s) Insufficient CPU" in third.message
    assert [p.id for p in await vc.pending(vcluster_id="vc1")] == ["t3"]
    nodes = await vc.nodes(vcluster_id="vc1")
    assert sorted(n.node_id for n in nodes) == sorted(admitted.vnode_ids)
    assert {n.parent_node for n in nodes} == {n.parent_node for n in info.nodes}
    assert all(n.labels["corral.io/vcluster-id"] == "vc1" for n in nodes)
    assert "t3" not in await vc.placements()


async def test_a_queued_cluster_is_admitted_when_another_is_destroyed(vc: Client) -> None:
    """The second cluster waits in the root's admission queue with a reason, and gets in when the first goes."""
    await vc.register_node("n1", {"CPU": 4})
    assert isinstance(await vc.create_virtual_cluster("first", flexible(3, 3)), Admitted)
    queued = await vc.create_virtual_cluster("second", flexible(3, 3))
    assert isinstance(queued, Queued) and queued.position == 1
    assert "admission queue of the root cluster" in queued.message
    assert (await vc.virtual_cluster("second")).state == "queued"
    assert await vc.destroy_virtual_cluster("first") == Destroyed("first", ["first"], [])

    async def second_admitted() -> bool:
        return (await vc.virtual_cluster("second")).state == "admitted"

    assert await holds_within(second_admitted), "the queued cluster is admitted"
    assert [info.cluster_id for info in await vc.virtual_clusters()] == ["second"]


async def test_a_nested_cluster_is_carved_from_its_parent_and_destroyed_with_it(vc: Client) -> None:
    """A child takes its nodes from the parent's virtual nodes; work inside it stays there; force takes both."""
    await vc.register_node("n1", {"CPU": 8})
    await vc.create_virtual_cluster("team", flexible(4, 4))
    child = await vc.create_virtual_cluster("team-a", flexible(2, 2), parent="team")
    assert isinstance(child, Admitted)
    team, team_a = await vc.virtual_cluster("team"), await vc.virtual_cluster("team-a")
    assert team.children == ["team-a"] and team_a.parent == "team"
    assert {node.parent_node for node in team_a.nodes} <= {node.node_id for node in team.nodes}
    placed = await vc.submit(ScheduleRequest("inner", {"CPU": 1}, vcluster_id="team-a"))
    assert isinstance(placed, Placed) and placed.node_id in child.vnode_ids
    too_big = await vc.create_virtual_cluster("team-b", flexible(8, 8), parent="team")
    assert isinstance(too_big, Queued) and "admission queue of virtual cluster team" in too_big.message
    with pytest.raises(NotFoundError, match="parent 'nobody'"):
        await vc.create_virtual_cluster("orphan", flexible(1), parent="nobody")
    gone = await vc.destroy_virtual_cluster("team", force=True)
    assert gone.vc_id == "team" and gone.destroyed[-1] == "team"
    assert sorted(gone.destroyed) == ["team", "team-a", "team-b"] and gone.stopped == ["inner"]
    assert await vc.virtual_clusters() == []


async def test_a_nested_cluster_grows_its_parent_by_whole_fixed_size_nodes(vc: Client, mesh: Mesh) -> None:
    """Two 3-CPU fixed-size nodes under a parent that may grow, on two 4-CPU nodes: the parent grows 3 on each
    node and the child gets in; a 6-CPU node fits on no node, so it waits with the reason and the parent keeps its
    size. Folding the log again gives the scheduler's view."""
    await vc.register_node("n1", {"CPU": 4})
    await vc.register_node("n2", {"CPU": 4})
    await vc.create_virtual_cluster("team", VirtualCluster())
    child = await vc.create_virtual_cluster("kid", cpus(3, 3, policy="STRICT_SPREAD"), parent="team")
    assert isinstance(child, Admitted), child
    team = await vc.virtual_cluster("team")
    assert sorted((node.parent_node, node.total_resources) for node in team.nodes) == [
        ("n1", {"CPU": 3.0}),
        ("n2", {"CPU": 3.0}),
    ]
    kid = await vc.virtual_cluster("kid")
    assert sorted(node.parent_node for node in kid.nodes) == sorted(node.node_id for node in team.nodes)
    big = await vc.create_virtual_cluster("big", cpus(6), parent="team")
    assert isinstance(big, Queued)
    assert "fixed_size_nodes[0].nodes[0] (CPU 6) fits whole on no node of virtual cluster team" in big.message
    assert (await vc.virtual_cluster("team")).total_resources == {"CPU": 6.0}
    expected = await full_replay_digest(mesh)
    assert (await service_digest(vc, "scheduler")).digest == expected
    assert (await service_digest(vc, "vclusters")).digest == expected


async def test_destroy_is_refused_with_live_work_and_forced_destroy_lists_what_it_stopped(vc: Client) -> None:
    """Without force the live actor is named and nothing changes; with force it is stopped and listed."""
    await vc.register_node("n1", {"CPU": 4})
    await vc.create_virtual_cluster("busy", flexible(2))
    assert isinstance(await vc.submit(ScheduleRequest("a1", {"CPU": 1}, vcluster_id="busy")), Placed)
    with pytest.raises(RejectedError, match=r"vc_id 'busy': still has live work \(a1\)") as refused:
        await vc.destroy_virtual_cluster("busy")
    assert refused.value.kind == "invalid"
    assert (await vc.virtual_cluster("busy")).state == "admitted"
    assert await vc.destroy_virtual_cluster("busy", force=True) == Destroyed("busy", ["busy"], ["a1"])
    with pytest.raises(NotFoundError):
        await vc.virtual_cluster("busy")
    with pytest.raises(NotFoundError):
        await vc.destroy_virtual_cluster("busy")
    assert await vc.placements() == {}


async def test_a_job_scopes_its_requests_and_introspection_and_destroys_its_cluster(vc: Client) -> None:
    """`client.job(virtual_cluster=...)`: work lands on the job's virtual nodes, queries see only the job."""
    await vc.register_node("n1", {"CPU": 4})
    await vc.register_node("n2", {"CPU": 4})
    outside = await vc.submit(ScheduleRequest("outside", {"CPU": 1}))
    async with vc.job(virtual_cluster=flexible(1, 2)) as job:
        assert job.vc_id.startswith("job-") and isinstance(job.admission, Admitted)
        assert await job.cluster_resources() == {"CPU": 1.0}
        first = await job.submit(ScheduleRequest("j1", {"CPU": 1}))
        second = await job.submit(ScheduleRequest("j2", {"CPU": 1}))
        waiting = await job.submit(ScheduleRequest("j3", {"CPU": 1}))
        assert isinstance(first, Placed) and isinstance(second, Placed) and isinstance(waiting, Pending)
        vnodes = {node.node_id for node in await job.nodes()}
        assert {first.node_id, second.node_id} <= vnodes
        assert await job.placements() == {"j1": first.node_id, "j2": second.node_id}
        assert [p.id for p in await job.pending()] == ["j3"]
        assert await job.cluster_resources() == {"CPU": 2.0} and await job.available_resources() == {"CPU": 0.0}
        assert isinstance(await job.create_virtual_cluster("job-child", VirtualCluster()), Admitted)
        assert (await job.virtual_cluster()).children == ["job-child"]
        assert sorted(a.actor_id for a in await job.actors()) == ["j1", "j2", "j3"]
        everything = await vc.placements()  # all work: the root's and every cluster's
        assert isinstance(outside, Placed) and everything == {"outside": outside.node_id, **await job.placements()}
    assert job.destroyed == Destroyed(job.vc_id, ["job-child", job.vc_id], ["j1", "j2", "j3"])
    assert await vc.virtual_clusters() == []
    assert await vc.placements() == {"outside": outside.node_id}


async def test_a_jobs_batch_is_kept_inside_its_cluster_and_decided_in_order(vc: Client) -> None:
    """`job.submit_many`: each request of the one message lands in the job's cluster (at most 2 CPUs), decided in
    order: the first two placed on its virtual nodes, the third waits; outside, nothing was placed."""
    await vc.register_node("n1", {"CPU": 4})
    async with vc.job(virtual_cluster=flexible(1, 2)) as job:
        answers = await job.submit_many([ScheduleRequest(f"m{i}", {"CPU": 1}) for i in range(3)])
        assert [type(answer) for answer in answers] == [Placed, Placed, Pending]
        placed = {answer.id: answer.node_id for answer in answers if isinstance(answer, Placed)}
        assert set(placed.values()) <= {node.node_id for node in await job.nodes()}
        assert await vc.placements() == await job.placements() == placed


async def test_a_resent_create_is_idempotent_and_bad_requests_are_refused_clearly(vc: Client, mesh: Mesh) -> None:
    """The same create again answers the same outcome with one event; another spec, a bad spec: rejected."""
    await vc.register_node("n1", {"CPU": 4})
    first = await vc.create_virtual_cluster("again", flexible(1, 2))
    assert await vc.create_virtual_cluster("again", flexible(1, 2)) == first
    events = await read_events(mesh.nats_url)
    assert [e.vc_id for e in events if isinstance(e, VirtualClusterRequested)] == ["again"]
    with pytest.raises(RejectedError, match="already exists with another spec") as conflict:
        await vc.create_virtual_cluster("again", flexible(2, 2))
    assert conflict.value.kind == "conflict"
    with pytest.raises(RejectedError, match=r"flexible_resource_max\['CPU'\].*must be >= flexible_resource_min"):
        await vc.create_virtual_cluster("bad", flexible(2, 1))
    with pytest.raises(RejectedError, match="resources"):
        await vc.create_virtual_cluster("negative", cpus(-1))
    assert [info.cluster_id for info in await vc.virtual_clusters()] == ["again"]


async def test_the_vclusters_service_restarted_from_its_snapshot_reaches_the_digest_of_a_full_replay(
    vc: Client, mesh: Mesh
) -> None:
    """Snapshot at stop, scheduler facts while it is down, restart: the same digest as folding the whole log."""
    await vc.register_node("n1", {"CPU": 4})
    await vc.register_node("n2", {"CPU": 4})
    await vc.create_virtual_cluster("kept", cpus(2, 2, policy="STRICT_SPREAD"))
    await vc.create_virtual_cluster("child", flexible(1), parent="kept")
    await vc.submit(ScheduleRequest("a1", {"CPU": 1}, vcluster_id="kept"))
    mesh.stop_service("vclusters")
    await vc.submit(ScheduleRequest("a2", {"CPU": 1}, vcluster_id="kept"))
    await vc.submit(ScheduleRequest("a3", {"CPU": 1}, vcluster_id="kept"))
    mesh.start_service("vclusters")
    await wait_ready(vc)
    assert "snapshot at sequence" in log_of(mesh, "vclusters")
    expected = await full_replay_digest(mesh)
    assert (await service_digest(vc, "vclusters")).digest == expected
    assert (await service_digest(vc, "scheduler")).digest == expected
    assert sorted(await vc.placements(vcluster_id="kept")) == ["a1", "a2", "a3"]


def test_the_sync_client_runs_a_job_too(mesh: Mesh) -> None:
    """`SyncClient.job` blocks where `Client.job` awaits."""
    with SyncClient(mesh.nats_url, timeout=10.0) as sync:
        sync.wait_ready(timeout=15.0)
        sync.register_node("n1", {"CPU": 2})
        with sync.job(virtual_cluster=flexible(1), vc_id="script") as job:
            assert job.vc_id == "script"
            decision = job.submit(ScheduleRequest("s1", {"CPU": 1}))
            assert isinstance(decision, Placed) and job.placements() == {"s1": decision.node_id}
        assert sync.virtual_clusters() == []


async def test_when_a_node_dies_its_virtual_nodes_are_reserved_again_or_the_cluster_is_degraded(vc: Client) -> None:
    """Fixed-size nodes on a dead node come back elsewhere when they can; else degraded until a node joins."""
    for node_id in ("n1", "n2", "n3"):
        await vc.register_node(node_id, {"CPU": 4})
    await vc.create_virtual_cluster("spread", cpus(3, 3, policy="STRICT_SPREAD"))
    placed = await vc.submit(ScheduleRequest("worker", {"CPU": 1}, vcluster_id="spread", max_restarts=1))
    assert isinstance(placed, Placed)
    hosts = {node.node_id: node.parent_node for node in (await vc.virtual_cluster("spread")).nodes}
    await vc.remove_node(hosts[placed.node_id or ""])

    async def moved() -> bool:
        info = await vc.virtual_cluster("spread")
        parents = {node.parent_node for node in info.nodes}
        return info.state == "admitted" and len(parents) == 2 and hosts[placed.node_id or ""] not in parents

    assert await holds_within(moved), "the lost fixed-size node is reserved again on the third node"
    restarted = await vc.decision("worker")
    assert isinstance(restarted, Placed) and restarted.node_id in hosts

    survivor = next(parent for parent in {n.parent_node for n in (await vc.virtual_cluster("spread")).nodes})
    await vc.remove_node(survivor)

    async def degraded() -> bool:
        return (await vc.virtual_cluster("spread")).state == "degraded"

    assert await holds_within(degraded), "no third node is left: the cluster is degraded"
    assert "lost and not reserved again yet" in (await vc.virtual_cluster("spread")).message
    await vc.register_node("n4", {"CPU": 4})

    async def repaired() -> bool:
        return (await vc.virtual_cluster("spread")).state == "admitted"

    assert await holds_within(repaired), "a new node repairs the cluster"


async def test_flexible_resources_grow_to_the_maximum_and_shrink_back_through_the_bus(vc: Client) -> None:
    """Borrowing from the physical nodes, bounded by the maximum; the minimum stays reserved."""
    await vc.register_node("n1", {"CPU": 4})
    await vc.register_node("n2", {"CPU": 4})
    await vc.create_virtual_cluster("elastic", flexible(1, 5))
    decisions = [await vc.submit(ScheduleRequest(f"e{i}", {"CPU": 1}, vcluster_id="elastic")) for i in range(6)]
    assert [type(d).__name__ for d in decisions] == ["Placed"] * 5 + ["Pending"]
    assert isinstance(decisions[5], Pending)
    assert "virtual cluster elastic is at its flexible maximum of CPU (5 of 5 held)" in decisions[5].message
    assert (await vc.virtual_cluster("elastic")).total_resources == {"CPU": 5.0}
    for i in range(6):
        await vc.remove_actor(f"e{i}")

    async def shrunk() -> bool:
        return (await vc.virtual_cluster("elastic")).total_resources == {"CPU": 1.0}

    assert await holds_within(shrunk), "the flexible nodes shrink back to the minimum"
    free = sum(node.available.get("CPU", 0.0) for node in await vc.nodes())
    assert free == 7.0


async def test_a_placement_group_and_its_virtual_cluster_twin_place_actors_on_the_same_nodes(vc: Client) -> None:
    """Proposal 004's equivalence: STRICT_SPREAD bundles vs fixed-size nodes labelled with a bundle index."""
    await vc.register_node("g1", {"CPU": 8, "GPU": 1})
    await vc.register_node("g2", {"CPU": 8, "GPU": 1})
    await vc.register_node("c1", {"CPU": 8})
    group = await vc.create_placement_group(PlacementGroupRequest("pg", [{"GPU": 1}, {"GPU": 1}], "STRICT_SPREAD"))
    assert isinstance(group, Placed)
    by_group: dict[int, str | None] = {}
    for index in range(2):
        strategy = PlacementGroupSchedulingStrategy("pg", index)
        decision = await vc.submit(ScheduleRequest(f"pg-actor{index}", {"GPU": 1}, scheduling_strategy=strategy))
        assert isinstance(decision, Placed)
        by_group[index] = decision.node_id
    await vc.remove_placement_group("pg")

    labelled = [FixedSizeNode({"GPU": 1}, {"bundle_index": str(index)}) for index in range(2)]
    await vc.create_virtual_cluster(
        "twin", VirtualCluster(fixed_size_nodes=[FixedSizeNodes(labelled, "STRICT_SPREAD")])
    )
    parents = {node.node_id: node.parent_node for node in (await vc.virtual_cluster("twin")).nodes}
    by_vc = {}
    for index in range(2):
        request = ScheduleRequest(
            f"vc-actor{index}", {"GPU": 1}, label_selector={"bundle_index": In(str(index))}, vcluster_id="twin"
        )
        decision = await vc.submit(request)
        assert isinstance(decision, Placed)
        by_vc[index] = parents[decision.node_id or ""]
    assert sorted(by_vc.values()) == sorted(str(node) for node in by_group.values()) == ["g1", "g2"]
