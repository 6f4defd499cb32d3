"""Node liveness: a silent node is unreachable (no new work, its work stays), declared dead after the grace (work
not tolerating `corral.io/unreachable` fails, `toleration_seconds` counts), dead once nothing tolerates it."""

from __future__ import annotations

import math

import pytest

from schemas import (
    ActorFailed,
    AnyEvent,
    NodeDeclaredDead,
    NodeDied,
    NodeReachable,
    NodeUnreachable,
    PlacementGroupRequest,
    ScheduleRequest,
)
from services.core import Cluster, Pending, Placed
from services.core.errors import RejectedError, UnfoldableEventError
from services.core.labels import UNREACHABLE_TAINT, node_condition
from services.core.liveness import Silence, liveness_event
from services.core.state import replay
from services.core.state.snapshot import decode, digest, dump, encode, restore
from tests.core.builders import WRONG_TYPES_IN_PYTHON_ONLY, make_actor, on_node

TIMEOUT, GRACE = 10.0, 30.0
LAST_HEARD = 1_795_870_931.0
"""2026-11-28T13:02:11Z"""


def judge(cluster: Cluster, node_id: str, silence: Silence) -> AnyEvent | None:
    """What the labels service would append, folded into `cluster` as the scheduler folds it."""
    event = liveness_event(cluster.view, node_id, silence, TIMEOUT, GRACE)
    if event is not None:
        cluster.fold(event)
    return event


def tolerating(actor_id: str, seconds: float | None = None) -> ScheduleRequest:
    """An actor on n0 tolerating the liveness taint (for `seconds`, or for ever)."""
    timed = {} if seconds is None else {UNREACHABLE_TAINT: seconds}
    return make_actor(actor_id, tolerations={UNREACHABLE_TAINT: "exists()"}, toleration_seconds=timed, max_restarts=-1)


def placed_on_n0(*actors: ScheduleRequest) -> Cluster:
    """n0 alone first (so every actor lands there), then n1."""
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4})
    for actor in actors:
        assert cluster.submit(actor) == Placed(actor.actor_id, "n0")
    cluster.add_node("n1", {"CPU": 4})
    return cluster


def unreachable(cluster: Cluster, node_id: str = "n0") -> None:
    event = judge(cluster, node_id, Silence(silent_for=TIMEOUT + 1, last_heard=LAST_HEARD))
    assert event == NodeUnreachable(node_id=node_id, last_heard=LAST_HEARD)


def test_a_node_silent_for_less_than_the_timeout_stays_as_it_is() -> None:
    cluster = placed_on_n0(make_actor("a"))
    assert judge(cluster, "n0", Silence(silent_for=TIMEOUT, last_heard=LAST_HEARD)) is None
    assert node_condition(cluster.view.nodes["n0"].taints) == "alive"


def test_an_unreachable_node_keeps_its_work_and_takes_no_new_work_saying_since_when() -> None:
    cluster = placed_on_n0(make_actor("a"))
    unreachable(cluster)
    assert cluster.placements() == {"a": "n0"}
    assert node_condition(cluster.view.nodes["n0"].taints) == "unreachable"
    pinned = cluster.submit(make_actor("b", label_selector=on_node("n0")))
    assert isinstance(pinned, Pending)
    assert pinned.nodes_by_reason == {
        "were unreachable since 2026-11-28T13:02:11Z (missed heartbeats)": ["n0"],
        "didn't match the label selector": ["n1"],
    }


def test_heartbeats_that_return_before_the_grace_lift_the_taint_and_keep_everything() -> None:
    cluster = placed_on_n0(make_actor("a"))
    unreachable(cluster)
    back = judge(cluster, "n0", Silence(0.1, LAST_HEARD, heard_again=True, unreachable_for=GRACE - 1))
    assert back == NodeReachable(node_id="n0", unreachable_for=GRACE - 1)
    assert cluster.view.nodes["n0"].taints == ()
    assert cluster.placements() == {"a": "n0"}
    assert cluster.submit(make_actor("b", label_selector=on_node("n0"))) == Placed("b", "n0")


def test_past_the_grace_a_node_nothing_tolerates_dies_naming_how_long_it_was_unreachable() -> None:
    cluster = placed_on_n0(make_actor("a", max_restarts=1))
    unreachable(cluster)
    assert judge(cluster, "n0", Silence(GRACE + 5, LAST_HEARD, unreachable_for=GRACE)) is None
    died = judge(cluster, "n0", Silence(GRACE + 15, LAST_HEARD, unreachable_for=GRACE + 1))
    assert died == NodeDied(
        node_id="n0", reason="declared dead after 31s unreachable (last heard 2026-11-28T13:02:11Z)"
    )
    assert cluster.placements() == {"a": "n1"}


def test_work_tolerating_unreachable_for_a_while_outlives_work_that_does_not() -> None:
    cluster = placed_on_n0(make_actor("plain", max_restarts=1), tolerating("ten", 10), tolerating("twenty", 20))
    unreachable(cluster)
    declared = judge(cluster, "n0", Silence(GRACE + 11, LAST_HEARD, unreachable_for=GRACE + 1))
    assert declared == NodeDeclaredDead(node_id="n0", unreachable_for=GRACE + 1)
    assert cluster.placements() == {"plain": "n1", "ten": "n0", "twenty": "n0"}
    failed = [event for event in cluster.events() if isinstance(event, ActorFailed)]
    assert [(event.actor_id, event.reason) for event in failed] == [
        ("plain", "evicted: its node was declared dead (unreachable since 2026-11-28T13:02:11Z)")
    ]
    assert node_condition(cluster.view.nodes["n0"].taints) == "dead"
    assert judge(cluster, "n0", Silence(GRACE + 20, LAST_HEARD, unreachable_for=GRACE + 10, dead_for=9.5)) is None
    lapsed = judge(cluster, "n0", Silence(GRACE + 21, LAST_HEARD, unreachable_for=GRACE + 11, dead_for=10))
    assert lapsed == NodeDeclaredDead(node_id="n0", unreachable_for=GRACE + 11, dead_for=10)
    assert cluster.placements() == {"plain": "n1", "ten": "n1", "twenty": "n0"}
    assert judge(cluster, "n0", Silence(GRACE + 25, LAST_HEARD, unreachable_for=GRACE + 15, dead_for=15)) is None
    died = judge(cluster, "n0", Silence(GRACE + 31, LAST_HEARD, unreachable_for=GRACE + 21, dead_for=20))
    assert isinstance(died, NodeDied)
    assert cluster.placements() == {"plain": "n1", "ten": "n1", "twenty": "n1"}
    assert "n0" not in cluster.view.nodes


def test_work_tolerating_unreachable_for_ever_keeps_a_dead_node_until_it_comes_back() -> None:
    cluster = placed_on_n0(make_actor("plain"), tolerating("stays"))
    unreachable(cluster)
    assert isinstance(judge(cluster, "n0", Silence(99, LAST_HEARD, unreachable_for=GRACE + 1)), NodeDeclaredDead)
    assert cluster.placements() == {"stays": "n0"}
    assert judge(cluster, "n0", Silence(10**6, LAST_HEARD, unreachable_for=10**6, dead_for=10**6)) is None
    back = judge(cluster, "n0", Silence(0.1, LAST_HEARD, heard_again=True, unreachable_for=10**6))
    assert isinstance(back, NodeReachable)
    assert cluster.placements() == {"stays": "n0"}
    assert cluster.view.nodes["n0"].taints == ()


def test_a_bundle_tolerating_unreachable_stays_and_one_that_does_not_is_reserved_again() -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4})
    kept = PlacementGroupRequest(
        "kept", [{"CPU": 1}], tolerations={UNREACHABLE_TAINT: "exists()"}, toleration_seconds={UNREACHABLE_TAINT: 5}
    )
    cluster.create_placement_group(kept)
    cluster.create_placement_group(PlacementGroupRequest("moved", [{"CPU": 1}]))
    assert cluster.placement_groups() == {"kept": ["n0"], "moved": ["n0"]}
    cluster.add_node("n1", {"CPU": 4})
    unreachable(cluster)
    assert isinstance(judge(cluster, "n0", Silence(99, LAST_HEARD, unreachable_for=GRACE + 1)), NodeDeclaredDead)
    assert cluster.placement_groups() == {"kept": ["n0"], "moved": ["n1"]}
    assert isinstance(judge(cluster, "n0", Silence(99, LAST_HEARD, unreachable_for=GRACE + 6, dead_for=5)), NodeDied)
    assert cluster.placement_groups() == {"kept": ["n1"], "moved": ["n1"]}


@pytest.mark.parametrize(
    ("seconds", "tolerations", "rule"),
    [
        ({"dedicated": 5}, {"dedicated": "exists()"}, "only corral.io/unreachable (a node declared dead) is timed"),
        ({UNREACHABLE_TAINT: 5}, {}, "times a taint the work does not tolerate: add corral.io/unreachable"),
        ({UNREACHABLE_TAINT: -1}, {UNREACHABLE_TAINT: "exists()"}, "must be a number of seconds from 0 to 604,800"),
        ({UNREACHABLE_TAINT: math.nan}, {UNREACHABLE_TAINT: "exists()"}, "must be a number of seconds"),
        ({UNREACHABLE_TAINT: math.inf}, {UNREACHABLE_TAINT: "exists()"}, "must be a number of seconds"),
        ({UNREACHABLE_TAINT: True}, {UNREACHABLE_TAINT: "exists()"}, "must be a number of seconds"),
        pytest.param(  # empty, but not the `{}` that skips the parse
            [], {}, "must be a map of taint keys to seconds", marks=WRONG_TYPES_IN_PYTHON_ONLY
        ),
    ],
)
def test_toleration_seconds_out_of_rule_are_refused_naming_the_field_and_change_nothing(
    seconds: dict[str, float], tolerations: dict[str, str], rule: str
) -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4})
    before = digest(cluster.view)
    with pytest.raises(RejectedError, match="toleration_seconds") as refused:
        cluster.submit(make_actor("a", tolerations=tolerations, toleration_seconds=seconds))
    assert rule in str(refused.value)
    assert digest(cluster.view) == before


@pytest.mark.parametrize("stage", ["unreachable", "declared dead", "a toleration lapsed", "back"])
def test_liveness_survives_a_snapshot_and_a_replay(stage: str) -> None:
    cluster = placed_on_n0(make_actor("plain"), tolerating("ten", 10), tolerating("stays"))
    unreachable(cluster)
    if stage != "unreachable":
        judge(cluster, "n0", Silence(99, LAST_HEARD, unreachable_for=GRACE + 1))
    if stage == "a toleration lapsed":
        judge(cluster, "n0", Silence(99, LAST_HEARD, unreachable_for=GRACE + 11, dead_for=10))
    if stage == "back":
        judge(cluster, "n0", Silence(0, LAST_HEARD, heard_again=True, unreachable_for=GRACE + 2))
    restored = restore(decode(encode(dump(cluster.view, sequence=7))))
    assert digest(restored) == digest(cluster.view) == digest(replay(cluster.events()))
    assert restored.nodes["n0"].taints == cluster.view.nodes["n0"].taints


@pytest.mark.parametrize(
    "forged",
    [
        NodeUnreachable(node_id="n0", last_heard=-1.0),
        NodeUnreachable(node_id="n0", last_heard=1e300),
        NodeReachable(node_id="n0", unreachable_for=-5.0),
        NodeDeclaredDead(node_id="n0", unreachable_for=1.0, dead_for=1e12),
    ],
)
def test_a_forged_liveness_time_is_unfoldable_and_changes_nothing(forged: AnyEvent) -> None:
    cluster = placed_on_n0(make_actor("a"))
    before = digest(cluster.view)
    with pytest.raises(UnfoldableEventError):
        cluster.fold(forged)
    assert digest(cluster.view) == before
