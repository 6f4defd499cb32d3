"""Actor affinity and anti-affinity (proposal 000): co-locate with, or keep away from, actors by their labels."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from schemas import ActorAffinityMatchExpression, ActorAffinitySchedulingStrategy
from services.core import Cluster, Placed
from tests.core.builders import (
    SIX_NODES,
    ZONE_OF_N2,
    affinity,
    expression,
    make_actor,
    make_cluster,
    node_of,
    on_node,
    six_nodes,
    waiting,
)

ZONE = "corral.io/availability-zone"
AFFINITY = "didn't match actor affinity rules"
ANTI_AFFINITY = "didn't match actor anti-affinity rules"
EXISTING_ANTI = "didn't satisfy existing actors' anti-affinity rules"
SEEDS = range(4)

# six_nodes() spreads n0..n5 over zones z0 {n0, n3}, z1 {n1, n4} and z2 {n2, n5}. Nodes have 8 CPUs: an anchor
# of 2 CPUs makes its node the one the DEFAULT policy packs onto, an anchor of 6 CPUs the one it spreads away from,
# so each rule below decides against what the policy alone would do.
ATTRACTS, REPELS = 2, 6


def strategy(*expressions: ActorAffinityMatchExpression, any_of: bool = False) -> ActorAffinitySchedulingStrategy:
    return ActorAffinitySchedulingStrategy(list(expressions), is_or_semantics=any_of)


@pytest.mark.parametrize(
    ("rule", "anchor_cpu", "allowed"),
    [
        (affinity("app", "IN", ["web"]), REPELS, {"n2"}),
        (affinity("app", "IN", ["db", "web"]), REPELS, {"n2"}),
        (affinity("app", "EXISTS"), REPELS, {"n2"}),
        (affinity("app", "IN", ["web"], topology_key=ZONE), REPELS, ZONE_OF_N2),
        (affinity("app", "EXISTS", topology_key=ZONE), REPELS, ZONE_OF_N2),
        (affinity("app", "NOT_IN", ["web"]), ATTRACTS, SIX_NODES - {"n2"}),
        (affinity("app", "DOES_NOT_EXIST"), ATTRACTS, SIX_NODES - {"n2"}),
        (affinity("app", "NOT_IN", ["web"], topology_key=ZONE), ATTRACTS, SIX_NODES - ZONE_OF_N2),
        (affinity("app", "DOES_NOT_EXIST", topology_key=ZONE), ATTRACTS, SIX_NODES - ZONE_OF_N2),
    ],
    ids=[
        "IN puts the actor on the node of the actor it matches",
        "IN with several values matches an actor carrying any one of them",
        "EXISTS puts the actor on the node of an actor carrying the key",
        "IN with the zone topology puts the actor in the zone of the actor it matches",
        "EXISTS with the zone topology puts the actor in the zone of an actor carrying the key",
        "NOT_IN keeps the actor off the node of the actor it matches",
        "DOES_NOT_EXIST keeps the actor off the node of an actor carrying the key",
        "NOT_IN with the zone topology keeps the actor out of the whole zone of the actor it matches",
        "DOES_NOT_EXIST with the zone topology keeps the actor out of the whole zone of an actor carrying the key",
    ],
)
def test_a_hard_rule_decides_where_the_actor_may_go(
    rule: ActorAffinitySchedulingStrategy, anchor_cpu: int, allowed: set[str]
) -> None:
    for seed in SEEDS:
        cluster = six_nodes(seed)
        node_of(cluster.submit(make_actor("anchor", anchor_cpu, labels={"app": "web"}, label_selector=on_node("n2"))))
        assert node_of(cluster.submit(make_actor("b", scheduling_strategy=rule))) in allowed, f"seed {seed}"


def test_with_the_zone_topology_any_node_of_the_zone_will_do_when_the_matched_actors_node_is_full() -> None:
    cluster = six_nodes()
    node_of(cluster.submit(make_actor("anchor", 8, labels={"app": "web"}, label_selector=on_node("n2"))))
    decision = cluster.submit(make_actor("b", scheduling_strategy=affinity("app", "IN", ["web"], topology_key=ZONE)))
    assert node_of(decision) == "n5"


def test_a_custom_node_label_works_as_a_topology_key() -> None:
    cluster = Cluster()
    for index, rack in enumerate(["r0", "r0", "r1", "r1"]):
        cluster.add_node(f"n{index}", {"CPU": 8}, labels={"rack": rack})
    node_of(cluster.submit(make_actor("anchor", 8, labels={"app": "web"}, label_selector=on_node("n2"))))
    rule = affinity("app", "IN", ["web"], topology_key="rack")
    for index in range(3):
        assert node_of(cluster.submit(make_actor(f"b{index}", scheduling_strategy=rule))) == "n3"


@pytest.mark.parametrize(
    ("anchor_cpu", "rule", "allowed"),
    [
        (
            REPELS,
            strategy(expression("app", "IN", ["web"], topology_key=ZONE), expression("app", "NOT_IN", ["cache"])),
            {"n2"},
        ),
        (
            ATTRACTS,
            strategy(expression("app", "NOT_IN", ["web"]), expression("app", "NOT_IN", ["cache"])),
            {"n0", "n1", "n3", "n4"},
        ),
        (
            REPELS,
            strategy(expression("app", "EXISTS"), expression("app", "NOT_IN", ["db"], topology_key=ZONE)),
            ZONE_OF_N2,
        ),
        (REPELS, strategy(expression("app", "IN", ["web"]), expression("app", "IN", ["cache"])), None),
        (
            REPELS,
            strategy(expression("app", "IN", ["web"]), expression("app", "IN", ["cache"]), any_of=True),
            ZONE_OF_N2,
        ),
        (
            REPELS,
            strategy(expression("app", "IN", ["web"]), expression("app", "IN", ["nobody"]), any_of=True),
            {"n2"},
        ),
    ],
    ids=[
        "IN web in the zone AND NOT_IN cache on the node leave only the web actor's node",
        "NOT_IN web AND NOT_IN cache keep the actor off both of their nodes",
        "EXISTS app AND NOT_IN db in the zone leave the nodes with an app actor in a zone without db",
        "IN web AND IN cache on the node cannot both hold, so the actor waits",
        "IN web OR IN cache with is_or_semantics puts the actor next to either",
        "with is_or_semantics an expression nothing satisfies does not block the one that holds",
    ],
)
def test_expressions_are_anded_unless_is_or_semantics_ors_them(
    anchor_cpu: int, rule: ActorAffinitySchedulingStrategy, allowed: set[str] | None
) -> None:
    for seed in SEEDS:
        cluster = six_nodes(seed)
        for actor_id, app, node in [("web", "web", "n2"), ("cache", "cache", "n5"), ("db", "db", "n1")]:
            anchor = make_actor(actor_id, anchor_cpu, labels={"app": app}, label_selector=on_node(node))
            node_of(cluster.submit(anchor))
        decision = cluster.submit(make_actor("b", scheduling_strategy=rule))
        if allowed is None:
            assert waiting(decision).reasons == {AFFINITY: 6}
        else:
            assert node_of(decision) in allowed, f"seed {seed}"


@pytest.mark.parametrize(
    ("namespace", "rule", "placed"),
    [
        ("default", affinity("app", "IN", ["web"]), False),
        ("other", affinity("app", "IN", ["web"]), True),
        ("default", affinity("app", "NOT_IN", ["web"]), True),
        ("other", affinity("app", "NOT_IN", ["web"]), False),
        ("default", affinity("app", "DOES_NOT_EXIST"), True),
    ],
    ids=[
        "IN does not see a matching actor of another namespace, so the actor waits",
        "IN sees a matching actor of its own namespace",
        "NOT_IN does not see a matching actor of another namespace, so the actor may share its node",
        "NOT_IN sees a matching actor of its own namespace and keeps off its node",
        "DOES_NOT_EXIST does not see an actor of another namespace carrying the key",
    ],
)
def test_matching_is_scoped_to_the_requests_namespace(
    namespace: str, rule: ActorAffinitySchedulingStrategy, placed: bool
) -> None:
    cluster = make_cluster(2, cpu=8)
    anchor = make_actor("anchor", labels={"app": "web"}, namespace="other", label_selector=on_node("n0"))
    node_of(cluster.submit(anchor))
    decision = cluster.submit(
        make_actor("b", namespace=namespace, scheduling_strategy=rule, label_selector=on_node("n0"))
    )
    if placed:
        assert node_of(decision) == "n0"
    else:
        pending = waiting(decision)
        assert pending.nodes_by_reason.get(AFFINITY, []) + pending.nodes_by_reason.get(ANTI_AFFINITY, []) == ["n0"]


@pytest.mark.parametrize(
    ("anchor_cpu", "rule", "allowed"),
    [
        (REPELS, affinity("app", "IN", ["web"], soft=True), {"n2"}),
        (REPELS, affinity("app", "EXISTS", soft=True), {"n2"}),
        (REPELS, affinity("app", "IN", ["web"], soft=True, topology_key=ZONE), ZONE_OF_N2),
        (ATTRACTS, affinity("app", "NOT_IN", ["web"], soft=True), SIX_NODES - {"n2"}),
        (ATTRACTS, affinity("app", "DOES_NOT_EXIST", soft=True, topology_key=ZONE), SIX_NODES - ZONE_OF_N2),
        (ATTRACTS, affinity("app", "IN", ["nobody"], soft=True), SIX_NODES),
        (8, affinity("app", "IN", ["web"], soft=True), SIX_NODES - {"n2"}),
    ],
    ids=[
        "a soft IN prefers the node of the actor it matches over what the policy would pick",
        "a soft EXISTS prefers the node of an actor carrying the key",
        "a soft IN with the zone topology prefers the zone of the actor it matches",
        "a soft NOT_IN prefers to stay off the node of the actor it matches",
        "a soft DOES_NOT_EXIST with the zone topology prefers other zones",
        "a soft IN that nothing satisfies is dropped and the actor is placed anyway",
        "a soft IN whose preferred node is full is dropped and the actor lands elsewhere",
    ],
)
def test_a_soft_expression_is_a_preference(
    anchor_cpu: int, rule: ActorAffinitySchedulingStrategy, allowed: set[str]
) -> None:
    for seed in SEEDS:
        cluster = six_nodes(seed)
        node_of(cluster.submit(make_actor("anchor", anchor_cpu, labels={"app": "web"}, label_selector=on_node("n2"))))
        assert node_of(cluster.submit(make_actor("b", scheduling_strategy=rule))) in allowed, f"seed {seed}"


@pytest.mark.parametrize(
    ("soft", "placed"),
    [(True, True), (False, False)],
    ids=[
        "a soft NOT_IN that every node violates is dropped and the actor is placed",
        "a hard NOT_IN that every node violates leaves the actor pending",
    ],
)
def test_anti_affinity_that_every_node_violates(soft: bool, placed: bool) -> None:
    cluster = make_cluster(2, cpu=8)
    for node in ("n0", "n1"):
        node_of(cluster.submit(make_actor(f"web-{node}", labels={"app": "web"}, label_selector=on_node(node))))
    decision = cluster.submit(make_actor("b", scheduling_strategy=affinity("app", "NOT_IN", ["web"], soft=soft)))
    if placed:
        assert node_of(decision) in {"n0", "n1"}
    else:
        pending = waiting(decision)
        assert pending.reasons == {ANTI_AFFINITY: 2}
        assert pending.message == f"0/2 nodes are available: 2 node(s) {ANTI_AFFINITY}."


@pytest.mark.parametrize(
    ("rule", "same"),
    [
        (affinity("app", "IN", ["web"]), "corral.io/node-id"),
        (affinity("app", "EXISTS"), "corral.io/node-id"),
        (affinity("app", "IN", ["web"], topology_key=ZONE), ZONE),
    ],
    ids=[
        "an IN nothing satisfies waits, then joins the matching actor's node in the call that places it",
        "an EXISTS nothing satisfies waits, then joins the matching actor's node in the call that places it",
        "a zone IN nothing satisfies waits, then joins the matching actor's zone in the call that places it",
    ],
)
def test_a_hard_affinity_waits_until_a_matching_actor_is_placed(
    rule: ActorAffinitySchedulingStrategy, same: str
) -> None:
    cluster = six_nodes()
    pending = waiting(cluster.submit(make_actor("b", scheduling_strategy=rule)))
    assert pending.reasons == {AFFINITY: 6}
    assert pending.message == f"0/6 nodes are available: 6 node(s) {AFFINITY}."
    assert [p.id for p in cluster.pending()] == ["b"]
    anchor = node_of(cluster.submit(make_actor("anchor", REPELS, labels={"app": "web"})))
    placements = cluster.placements()
    assert "b" in placements, "the submit that placed the matching actor should have placed the waiting one"
    labels = cluster.view.nodes
    assert labels[placements["b"]].labels[same] == labels[anchor].labels[same]
    assert cluster.pending() == []


def test_a_waiting_affinity_is_placed_by_whatever_call_places_the_matching_actor() -> None:
    cluster = make_cluster(2, cpu=4)
    waiting(cluster.submit(make_actor("b", scheduling_strategy=affinity("app", "IN", ["big"]))))
    waiting(cluster.submit(make_actor("big", 6, labels={"app": "big"})))
    cluster.add_node("large", {"CPU": 8})
    assert cluster.placements() == {"big": "large", "b": "large"}


@pytest.mark.parametrize(
    ("labels", "rule", "placed"),
    [
        ({"app": "web"}, affinity("app", "IN", ["web"]), True),
        ({"app": "web"}, affinity("app", "EXISTS"), True),
        ({"app": "web"}, affinity("app", "IN", ["web"], topology_key=ZONE), True),
        ({"app": "db"}, affinity("app", "IN", ["web"]), False),
        ({}, affinity("app", "EXISTS"), False),
        (
            {"app": "web"},
            strategy(expression("app", "IN", ["web"]), expression("tier", "IN", ["front"])),
            False,
        ),
        (
            {"app": "web", "tier": "front"},
            strategy(expression("app", "IN", ["web"]), expression("tier", "EXISTS")),
            True,
        ),
    ],
    ids=[
        "the first of a group whose labels satisfy its own IN lands anywhere feasible",
        "the first of a group whose labels satisfy its own EXISTS lands anywhere feasible",
        "the first of a group whose labels satisfy its own zone IN lands anywhere feasible",
        "an actor whose labels do not satisfy its own IN waits",
        "an actor without the key its own EXISTS asks for waits",
        "an actor whose labels satisfy only one of its ANDed IN expressions waits",
        "an actor whose labels satisfy all of its ANDed IN and EXISTS expressions lands anywhere feasible",
    ],
)
def test_the_first_of_a_group_may_start_it(
    labels: dict[str, str], rule: ActorAffinitySchedulingStrategy, placed: bool
) -> None:
    cluster = six_nodes()
    decision = cluster.submit(make_actor("first", labels=labels, scheduling_strategy=rule))
    if placed:
        first = node_of(decision)
        second = node_of(cluster.submit(make_actor("second", REPELS, labels=labels, scheduling_strategy=rule)))
        topology = rule.match_expressions[0].topology_key
        nodes = cluster.view.nodes
        assert nodes[second].labels[topology] == nodes[first].labels[topology], "the second joins the first"
    else:
        assert waiting(decision).reasons == {AFFINITY: 6}


def test_the_first_of_a_group_joins_a_matching_actor_when_one_is_placed() -> None:
    for seed in SEEDS:
        cluster = six_nodes(seed)
        node_of(cluster.submit(make_actor("anchor", REPELS, labels={"app": "web"}, label_selector=on_node("n2"))))
        decision = cluster.submit(
            make_actor("b", labels={"app": "web"}, scheduling_strategy=affinity("app", "IN", ["web"]))
        )
        assert node_of(decision) == "n2", f"seed {seed}"


def test_one_expression_means_the_same_with_or_without_is_or_semantics_for_the_first_of_a_group() -> None:
    cluster = six_nodes()
    rule = affinity("app", "IN", ["web"], is_or_semantics=True)
    decision = cluster.submit(make_actor("first", labels={"app": "web"}, scheduling_strategy=rule))
    assert isinstance(decision, Placed), decision


def test_the_first_of_a_group_may_start_it_when_placed_actors_match_only_part_of_its_expressions() -> None:
    cluster = six_nodes()
    node_of(cluster.submit(make_actor("web-only", labels={"app": "web"})))
    rule = strategy(expression("app", "IN", ["web"]), expression("tier", "IN", ["front"]))
    decision = cluster.submit(make_actor("first", labels={"app": "web", "tier": "front"}, scheduling_strategy=rule))
    assert isinstance(decision, Placed), decision


@pytest.mark.parametrize(
    ("placed_rule", "placed_namespace", "newcomer_labels", "target", "blocked"),
    [
        (affinity("app", "NOT_IN", ["db"]), "default", {"app": "db"}, "n0", True),
        (affinity("app", "NOT_IN", ["db"]), "default", {"app": "web"}, "n0", False),
        (affinity("app", "NOT_IN", ["db"]), "default", {"app": "db"}, "n3", False),
        (affinity("app", "DOES_NOT_EXIST"), "default", {"app": "web"}, "n0", True),
        (affinity("app", "DOES_NOT_EXIST"), "default", {"team": "ml"}, "n0", False),
        (affinity("app", "NOT_IN", ["db"], topology_key=ZONE), "default", {"app": "db"}, "n3", True),
        (affinity("app", "NOT_IN", ["db"], is_or_semantics=True), "default", {"app": "db"}, "n0", False),
        (affinity("app", "NOT_IN", ["db"], soft=True), "default", {"app": "db"}, "n0", False),
        (affinity("app", "NOT_IN", ["db"]), "other", {"app": "db"}, "n0", False),
    ],
    ids=[
        "a placed actor's hard NOT_IN keeps a newcomer it matches off its node",
        "a placed actor's hard NOT_IN lets a newcomer with another value onto its node",
        "a placed actor's hard NOT_IN on the node topology does not reach the other nodes of its zone",
        "a placed actor's hard DOES_NOT_EXIST keeps any newcomer carrying the key off its node",
        "a placed actor's hard DOES_NOT_EXIST lets a newcomer without the key onto its node",
        "a placed actor's hard NOT_IN with the zone topology keeps a newcomer it matches out of its zone",
        "a placed actor's NOT_IN under is_or_semantics binds only itself, not newcomers",
        "a placed actor's soft NOT_IN binds only itself, not newcomers",
        "a placed actor's hard NOT_IN binds only newcomers of its own namespace",
    ],
)
def test_hard_anti_affinity_of_placed_actors_is_symmetric(
    placed_rule: ActorAffinitySchedulingStrategy,
    placed_namespace: str,
    newcomer_labels: dict[str, str],
    target: str,
    blocked: bool,
) -> None:
    cluster = six_nodes()
    placed = make_actor("x", namespace=placed_namespace, scheduling_strategy=placed_rule, label_selector=on_node("n0"))
    node_of(cluster.submit(placed))
    decision = cluster.submit(make_actor("y", labels=newcomer_labels, label_selector=on_node(target)))
    if blocked:
        pending = waiting(decision)
        assert pending.nodes_by_reason[EXISTING_ANTI] == [target]
        assert pending.reasons == {"didn't match the label selector": 5, EXISTING_ANTI: 1}
    else:
        assert node_of(decision) == target


def test_an_actor_with_a_hard_does_not_exist_rule_gets_its_node_to_itself() -> None:
    cluster = make_cluster(4, cpu=8)
    exclusive = make_actor("exclusive", 2, scheduling_strategy=affinity("app", "DOES_NOT_EXIST"))
    home = node_of(cluster.submit(exclusive))
    for index in range(10):
        assert node_of(cluster.submit(make_actor(f"s{index}", labels={"app": f"s{index}"}))) != home
    assert cluster.view.nodes[home].actors == {"exclusive"}
    assert node_of(cluster.submit(make_actor("unlabelled"))) in {"n0", "n1", "n2", "n3"}


def test_an_exclusive_actor_keeps_off_nodes_that_already_run_labelled_actors() -> None:
    cluster = make_cluster(3, cpu=8)
    node_of(cluster.submit(make_actor("a", labels={"app": "a"}, label_selector=on_node("n0"))))
    node_of(cluster.submit(make_actor("b", labels={"app": "b"}, label_selector=on_node("n1"))))
    assert (
        node_of(cluster.submit(make_actor("exclusive", scheduling_strategy=affinity("app", "DOES_NOT_EXIST")))) == "n2"
    )


def _block_by_incoming_not_in(cluster: Cluster) -> str:
    node_of(cluster.submit(make_actor("blocker", labels={"app": "web"}, label_selector=on_node("n0"))))
    waiting(
        cluster.submit(
            make_actor("b", scheduling_strategy=affinity("app", "NOT_IN", ["web"]), label_selector=on_node("n0"))
        )
    )
    return "blocker"


def _block_by_existing_not_in(cluster: Cluster) -> str:
    blocker = make_actor("blocker", scheduling_strategy=affinity("app", "NOT_IN", ["db"]), label_selector=on_node("n0"))
    node_of(cluster.submit(blocker))
    waiting(cluster.submit(make_actor("b", labels={"app": "db"}, label_selector=on_node("n0"))))
    return "blocker"


@pytest.mark.parametrize("how", ["remove", "fail"], ids=["removed", "failed for good"])
@pytest.mark.parametrize(
    "block",
    [_block_by_incoming_not_in, _block_by_existing_not_in],
    ids=[
        "an actor kept off a node by its own NOT_IN is placed there once the matching actor is",
        "an actor kept off a node by a placed actor's NOT_IN is placed there once that actor is",
    ],
)
def test_an_actor_that_leaves_takes_its_labels_out_of_the_index(how: str, block: Callable[[Cluster], str]) -> None:
    cluster = make_cluster(2, cpu=8)
    blocker = block(cluster)
    if how == "remove":
        cluster.remove_actor(blocker)
    else:
        cluster.fail_actor(blocker)
    assert cluster.placements() == {"b": "n0"}


@pytest.mark.parametrize(
    "how", ["remove", "fail"], ids=["once the only matching actor is removed", "once it fails for good"]
)
def test_an_in_rule_no_longer_sees_an_actor_that_left(how: str) -> None:
    cluster = make_cluster(2, cpu=8)
    node_of(cluster.submit(make_actor("web", labels={"app": "web"})))
    if how == "remove":
        cluster.remove_actor("web")
    else:
        cluster.fail_actor("web")
    assert waiting(cluster.submit(make_actor("b", scheduling_strategy=affinity("app", "IN", ["web"])))).reasons == {
        AFFINITY: 2
    }


def _collocated_pair(cluster: Cluster) -> str:
    home = node_of(cluster.submit(make_actor("A", labels={"app": "a"}, max_restarts=1)))
    assert (
        node_of(cluster.submit(make_actor("B", scheduling_strategy=affinity("app", "IN", ["a"]), max_restarts=1)))
        == home
    )
    return home


def test_when_a_restarts_elsewhere_b_stays_where_it_is_and_follows_a_only_when_b_fails() -> None:
    for seed in SEEDS:
        cluster = make_cluster(4, cpu=8, seed=seed)
        home = _collocated_pair(cluster)
        cluster.add_taints(home, {"maintenance": "true"})  # NoSchedule: evicts nothing, but A cannot come back here
        cluster.fail_actor("A")
        moved = cluster.placements()
        assert moved["A"] != home
        assert moved["B"] == home, "B is not affected by A's restart"
        cluster.fail_actor("B")
        assert cluster.placements()["B"] == moved["A"], "B restarts next to A"


def test_when_a_fails_for_good_b_keeps_running() -> None:
    cluster = make_cluster(4, cpu=8)
    node_of(cluster.submit(make_actor("A", labels={"app": "a"})))
    home = node_of(cluster.submit(make_actor("B", scheduling_strategy=affinity("app", "IN", ["a"]))))
    cluster.fail_actor("A")
    assert cluster.placements() == {"B": home}


def test_when_the_node_of_a_and_b_dies_both_restart_together_elsewhere() -> None:
    for seed in SEEDS:
        cluster = make_cluster(4, cpu=8, seed=seed)
        home = _collocated_pair(cluster)
        cluster.remove_node(home)
        placements = cluster.placements()
        assert placements["A"] != home
        assert placements["B"] == placements["A"]
