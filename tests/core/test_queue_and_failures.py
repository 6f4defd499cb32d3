"""Node deaths, actor failures and the pending queue: who restarts, who is gone, who is placed first."""

from __future__ import annotations

import re

import pytest

from schemas import ActorFailed, NodeAffinitySchedulingStrategy, NodeDied, PlacementGroupRequest, ScheduleRequest
from services.core import Cluster, Pending
from services.core.cluster import holding_work
from tests.core.builders import affinity, disks, make_actor, make_cluster, node_of, on_node, waiting

SEEDS = range(4)


@pytest.mark.parametrize(
    ("restarts", "comes_back"),
    [(1, True), (3, True), (-1, True), (0, False)],
    ids=[
        "an actor with one restart left is scheduled again when its node dies",
        "an actor with several restarts left is scheduled again when its node dies",
        "an actor that restarts forever is scheduled again when its node dies",
        "an actor without restarts is gone when its node dies",
    ],
)
def test_a_node_death_fails_its_actors(restarts: int, comes_back: bool) -> None:
    for seed in SEEDS:
        cluster = disks(seed)
        home = node_of(cluster.submit(make_actor("a", label_selector={"disk": "ssd"}, max_restarts=restarts)))
        cluster.remove_node(home)
        placements = cluster.placements()
        if comes_back:
            assert placements["a"] in {"n0", "n1"} - {home}, "the label selector still holds after the restart"
        else:
            assert placements == {}
            assert cluster.pending() == []


def test_a_restarting_actor_waits_when_no_node_satisfies_its_rules_any_more() -> None:
    cluster = disks()
    node_of(cluster.submit(make_actor("a", label_selector={"disk": "ssd"}, max_restarts=-1)))
    cluster.remove_node("n0")
    cluster.remove_node("n1")
    [pending] = cluster.pending()
    assert pending.id == "a"
    assert pending.reasons == {"didn't match the label selector": 2}
    cluster.add_node("n9", {"CPU": 4}, labels={"disk": "ssd"})
    assert cluster.placements() == {"a": "n9"}


def test_restarts_run_out() -> None:
    cluster = make_cluster(3, cpu=4)
    node_of(cluster.submit(make_actor("a", max_restarts=2)))
    cluster.fail_actor("a")
    cluster.fail_actor("a")
    assert "a" in cluster.placements(), "two failures are within max_restarts=2"
    cluster.fail_actor("a")
    assert cluster.placements() == {}
    assert cluster.pending() == []


@pytest.mark.parametrize(
    "request_",
    [
        make_actor("a", 8),
        make_actor("a", scheduling_strategy=affinity("app", "IN", ["nobody"])),
        make_actor("a", label_selector={"disk": "nvme"}),
    ],
    ids=[
        "failing an actor that waits for resources is refused with a ValueError",
        "failing an actor that waits for a matching actor is refused with a ValueError",
        "failing an actor that waits for a matching node is refused with a ValueError",
    ],
)
def test_a_pending_actor_cannot_fail(request_: ScheduleRequest) -> None:
    cluster = make_cluster(2, cpu=4)
    waiting(cluster.submit(request_))
    with pytest.raises(ValueError, match="a"):
        cluster.fail_actor("a")
    assert [p.id for p in cluster.pending()] == ["a"]


def one_busy_node() -> Cluster:
    cluster = make_cluster(1, cpu=2)
    node_of(cluster.submit(make_actor("blocker", 2)))
    return cluster


@pytest.mark.parametrize(
    ("waiting_actors", "placed_first"),
    [
        ([("low", 0), ("high", 5)], "high"),
        ([("high", 5), ("low", 0)], "high"),
        ([("first", 0), ("second", 0)], "first"),
        ([("first", 3), ("second", 3), ("third", 3)], "first"),
        ([("negative", -1), ("default", 0)], "default"),
    ],
    ids=[
        "the higher-priority actor is placed first though it arrived later",
        "the higher-priority actor is placed first when it also arrived first",
        "among equal priorities the earlier arrival is placed first",
        "among several equal priorities the earliest arrival is placed first",
        "a negative priority comes after the default one",
    ],
)
def test_freed_resources_go_to_the_queue_in_priority_then_arrival_order(
    waiting_actors: list[tuple[str, int]], placed_first: str
) -> None:
    cluster = one_busy_node()
    for actor_id, priority in waiting_actors:
        waiting(cluster.submit(make_actor(actor_id, 2, priority=priority)))
    assert [p.id for p in cluster.pending()] == [
        actor_id for actor_id, _ in sorted(waiting_actors, key=lambda item: -item[1])
    ]
    cluster.remove_actor("blocker")
    assert cluster.placements() == {placed_first: "n0"}


def test_an_actor_that_still_cannot_be_placed_does_not_hold_back_lower_priority_ones() -> None:
    cluster = make_cluster(1, cpu=2)
    node_of(cluster.submit(make_actor("b1", 1)))
    node_of(cluster.submit(make_actor("b2", 1)))
    waiting(cluster.submit(make_actor("high", 2, priority=10)))
    waiting(cluster.submit(make_actor("low", 1, priority=0)))
    cluster.remove_actor("b1")
    assert cluster.placements() == {"b2": "n0", "low": "n0"}
    assert [p.id for p in cluster.pending()] == ["high"]


def test_a_waiting_placement_group_takes_its_turn_by_priority_too() -> None:
    cluster = one_busy_node()
    waiting(cluster.submit(make_actor("actor", 2, priority=1)))
    waiting(cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 2}], priority=5)))
    assert [(p.id, p.kind) for p in cluster.pending()] == [("pg", "placement_group"), ("actor", "actor")]
    cluster.remove_actor("blocker")
    assert cluster.placement_groups() == {"pg": ["n0"]}
    assert [p.id for p in cluster.pending()] == ["actor"]


def test_pending_lists_actors_and_groups_with_fresh_explanations() -> None:
    cluster = make_cluster(3, cpu=4)
    waiting(cluster.submit(make_actor("big", 8)))
    waiting(cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 1}] * 4, "STRICT_SPREAD")))
    before = {p.id: p for p in cluster.pending()}
    assert before["big"].message == (
        "no node could ever host it (needs CPU 8; the largest node has 4); "
        "0/3 nodes are available: 3 node(s) Insufficient CPU."
    )
    assert before["pg"].group_reason == "STRICT_SPREAD needs 4 distinct nodes but only 3 can take a bundle"
    cluster.add_node("small", {"CPU": 2})
    after = {p.id: p for p in cluster.pending()}
    assert after["big"].message.endswith("0/4 nodes are available: 4 node(s) Insufficient CPU.")
    assert after["big"].nodes_by_reason == {"Insufficient CPU": ["n0", "n1", "n2", "small"]}
    assert set(after) == {"big"}, "the group became placeable on four nodes and left the queue"
    assert len(set(cluster.placement_groups()["pg"])) == 4


def test_work_a_busy_node_could_host_is_not_said_to_fit_no_node() -> None:
    """One node lacks the GPU, the other has it in use: both are "Insufficient GPU", but the work can wait."""
    cluster = Cluster()
    cluster.add_node("cpu", {"CPU": 4})
    cluster.add_node("gpu", {"CPU": 4, "GPU": 1})
    cluster.submit(ScheduleRequest("first", {"CPU": 1, "GPU": 1}))
    second = waiting(cluster.submit(ScheduleRequest("second", {"CPU": 1, "GPU": 1})))
    assert second.message == "0/2 nodes are available: 2 node(s) Insufficient GPU."


def test_pending_forgets_work_that_was_removed() -> None:
    cluster = make_cluster(2, cpu=4)
    waiting(cluster.submit(make_actor("big", 8)))
    cluster.remove_actor("big")
    assert cluster.pending() == []
    assert waiting(cluster.submit(make_actor("big", 8))).id == "big"


MESSAGE = re.compile(r"^(?:.*; )?0/(\d+) nodes are available: (.*)\.$")


def counts_in(pending: Pending) -> list[int]:
    match = MESSAGE.match(pending.message)
    assert match is not None, pending.message
    return [int(part.split(" ", 1)[0]) for part in match.group(2).split(", ")]


@pytest.mark.parametrize(
    "request_",
    [
        make_actor("a", 16),
        make_actor("a", label_selector={"disk": "ssd"}),
        make_actor("a", 4, label_selector={"disk": "hdd"}),
        make_actor("a", 1, scheduling_strategy=NodeAffinitySchedulingStrategy("n1")),
        make_actor("a", 1, scheduling_strategy=affinity("app", "IN", ["web"])),
        make_actor("a", 1, label_selector=on_node("n0"), scheduling_strategy=affinity("app", "NOT_IN", ["web"])),
        ScheduleRequest("a", {"GPU": 1}),
    ],
    ids=[
        "an actor too big for any node is explained on every node",
        "an actor whose selector matches a full node and nothing else is explained on every node",
        "an actor mixing too-small nodes and mismatched labels is explained on every node",
        "an actor held to a tainted node is explained on every node",
        "an actor waiting for a matching actor is explained on every node",
        "an actor blocked by several rules on different nodes is explained on every node",
        "an actor asking for a resource no node has is explained on every node",
    ],
)
def test_a_pending_messages_counts_sum_to_the_node_count(request_: ScheduleRequest) -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4}, labels={"disk": "ssd"})
    cluster.add_node("n1", {"CPU": 4}, labels={"disk": "hdd"}, taints={"dedicated": "ml"})
    cluster.add_node("n2", {"CPU": 2}, labels={"disk": "hdd"})
    cluster.add_node("n3", {"CPU": 8})
    node_of(cluster.submit(make_actor("web", 4, labels={"app": "web"}, label_selector=on_node("n0"))))
    pending = waiting(cluster.submit(request_))
    assert sum(counts_in(pending)) == 4
    assert sum(pending.reasons.values()) == 4
    assert sorted(n for nodes in pending.nodes_by_reason.values() for n in nodes) == ["n0", "n1", "n2", "n3"]
    assert [p.message for p in cluster.pending()] == [pending.message]


@pytest.mark.parametrize(
    ("resources", "said"),
    [
        ({"CPU": 64}, "no node could ever host it (needs CPU 64; the largest node has 16); "),
        ({"CPU": 12, "GPU": 1}, "no node could ever host it (needs CPU 12, GPU 1 together; no node has all of them); "),
    ],
    ids=["one resource beyond every node names the largest", "resources no single node has together say so"],
)
def test_work_no_node_could_ever_host_says_so_before_the_counts(resources: dict[str, float], said: str) -> None:
    cluster = make_cluster(0)
    cluster.add_node("big", {"CPU": 16})
    cluster.add_node("gpu", {"CPU": 8, "GPU": 1})
    message = waiting(cluster.submit(ScheduleRequest("x", resources))).message
    assert message.startswith(said)
    assert "0/2 nodes are available: " in message


def test_work_that_fits_an_empty_node_says_nothing_of_never() -> None:
    cluster = make_cluster(1, cpu=4)
    cluster.submit(make_actor("first", 4))
    assert waiting(cluster.submit(make_actor("second", 4))).message == (
        "0/1 nodes are available: 1 node(s) Insufficient CPU."
    )


def test_only_tombstones_still_holding_work_are_failed_again_and_in_id_order() -> None:
    cluster = Cluster(seed=1)
    for node_id in ("n1", "n2", "n3"):
        cluster.add_node(node_id, {"CPU": 1.0})
    for actor_id in ("a1", "a3"):
        cluster.submit(ScheduleRequest(actor_id, {"CPU": 1.0}, max_restarts=0))
    on = cluster.placements()
    for node_id in ("n3", "n2", "n1"):  # folded as a follower does: the work stays on the tombstones
        cluster.fold(NodeDied(node_id=node_id), react=False)
    assert holding_work(cluster.view.dead) == sorted({on["a1"], on["a3"]})
    failed = [e.actor_id for e in cluster.reconcile() if isinstance(e, ActorFailed)]
    assert failed == sorted(on, key=lambda actor: on[actor])
    assert holding_work(cluster.view.dead) == [] and set(cluster.view.dead) == {"n1", "n2", "n3"}
