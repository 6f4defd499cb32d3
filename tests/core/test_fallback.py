"""Fallback strategies: the first option placeable now wins, else wait on the first feasible one, committing to none."""

from __future__ import annotations

from typing import Any

import pytest

from schemas import (
    BundleFallbackOption,
    FallbackOption,
    NodeAffinitySchedulingStrategy,
    PlacementGroupRequest,
    SelectorSpec,
)
from services.core import Cluster, Pending, Placed
from tests.core.builders import make_actor

SELECTOR = "didn't match the label selector"
BUNDLE_SELECTOR = "didn't match the bundle label selector"
NODE_AFFINITY = "didn't match the node affinity"


def _tiered_cluster() -> Cluster:
    """`fast` (tier=fast), `slow` (tier=slow) and `other` (no tier), 4 CPU each."""
    cluster = Cluster()
    cluster.add_node("fast", {"CPU": 4}, {"tier": "fast"})
    cluster.add_node("slow", {"CPU": 4}, {"tier": "slow"})
    cluster.add_node("other", {"CPU": 4})
    return cluster


def _fill(cluster: Cluster, *node_ids: str) -> None:
    for node_id in node_ids:
        pin = NodeAffinitySchedulingStrategy(node_id)
        assert cluster.submit(make_actor(f"busy-{node_id}", 4, scheduling_strategy=pin)) == Placed(
            f"busy-{node_id}", node_id
        )


def _options(*selectors: SelectorSpec) -> list[FallbackOption]:
    return [{"label_selector": selector} for selector in selectors]


@pytest.mark.parametrize(
    ("full", "primary", "fallbacks", "expected"),
    [
        ((), {"tier": "fast"}, [{"tier": "slow"}], "fast"),
        (("fast",), {"tier": "fast"}, [{"tier": "slow"}], "slow"),
        ((), {"tier": "gold"}, [{"tier": "slow"}], "slow"),
        ((), {"tier": "gold"}, [{"tier": "silver"}, {"tier": "slow"}], "slow"),
        (("fast",), {"tier": "fast"}, [{"tier": "slow"}, {"tier": "!exists()"}], "slow"),
        (("fast", "slow"), {"tier": "fast"}, [{"tier": "slow"}, {"tier": "!exists()"}], "other"),
        (("slow",), {"tier": "fast"}, [{"tier": "slow"}], "fast"),
    ],
    ids=[
        "the primary wins when it can be placed now",
        "a full primary gives way to a fallback with room",
        "a primary matching no node gives way to the fallback",
        "fallbacks are tried in order, skipping one matching no node",
        "the first fallback with room wins over later ones",
        "the last fallback is used when every earlier option is full",
        "a full fallback does not matter when the primary has room",
    ],
)
def test_the_first_option_placeable_now_wins(
    full: tuple[str, ...], primary: SelectorSpec, fallbacks: list[SelectorSpec], expected: str
) -> None:
    cluster = _tiered_cluster()
    _fill(cluster, *full)
    request = make_actor("a", label_selector=primary, fallback_strategy=_options(*fallbacks))
    assert cluster.submit(request) == Placed("a", expected)


def test_an_empty_fallback_selector_makes_the_primary_a_soft_preference() -> None:
    cluster = _tiered_cluster()
    request: dict[str, Any] = {"label_selector": {"tier": "fast"}, "fallback_strategy": _options({})}
    for index in range(4):
        assert cluster.submit(make_actor(f"a{index}", **request)) == Placed(f"a{index}", "fast")
    overflow = cluster.submit(make_actor("a4", **request))
    assert isinstance(overflow, Placed)
    assert overflow.node_id in {"slow", "other"}


@pytest.mark.parametrize(
    ("full", "primary", "fallbacks", "reasons", "short"),
    [
        (("slow",), {"tier": "gold"}, [{"tier": "slow"}], {SELECTOR: 2, "Insufficient CPU": 1}, ["slow"]),
        (("fast", "slow"), {"tier": "fast"}, [{"tier": "slow"}], {SELECTOR: 2, "Insufficient CPU": 1}, ["fast"]),
        (
            ("fast", "slow"),
            {"tier": "gold"},
            [{"tier": "slow"}, {"tier": "fast"}],
            {SELECTOR: 2, "Insufficient CPU": 1},
            ["slow"],
        ),
        (
            ("fast", "slow"),
            {"tier": "gold"},
            [{"tier": "silver"}, {"tier": "in(fast,slow)"}],
            {SELECTOR: 1, "Insufficient CPU": 2},
            ["fast", "slow"],
        ),
    ],
    ids=[
        "an infeasible primary waits on the full fallback and reports the fallback's reasons",
        "a full primary is the first feasible option, so it reports the primary's reasons",
        "of two full fallbacks the first one's reasons are reported",
        "infeasible options are skipped when choosing whose reasons to report",
    ],
)
def test_an_actor_that_cannot_be_placed_now_waits_on_the_first_feasible_option(
    full: tuple[str, ...],
    primary: SelectorSpec,
    fallbacks: list[SelectorSpec],
    reasons: dict[str, int],
    short: list[str],
) -> None:
    cluster = _tiered_cluster()
    _fill(cluster, *full)
    decision = cluster.submit(make_actor("a", label_selector=primary, fallback_strategy=_options(*fallbacks)))
    assert isinstance(decision, Pending)
    assert decision.reasons == reasons
    assert decision.nodes_by_reason["Insufficient CPU"] == short
    assert sum(decision.reasons.values()) == 3
    assert [p.reasons for p in cluster.pending()] == [reasons]


def test_when_no_option_is_feasible_the_reasons_are_the_primarys() -> None:
    cluster = _tiered_cluster()
    request = make_actor(
        "a",
        label_selector={"tier": "fast"},
        fallback_strategy=_options({"tier": "gold"}),
        scheduling_strategy=NodeAffinitySchedulingStrategy("other"),
    )
    decision = cluster.submit(request)
    assert isinstance(decision, Pending)
    assert decision.reasons == {SELECTOR: 2, NODE_AFFINITY: 1}
    assert decision.nodes_by_reason == {SELECTOR: ["other", "slow"], NODE_AFFINITY: ["fast"]}


# waiting commits to nothing


def test_a_node_added_for_the_primary_wins_over_the_fallback_being_waited_on() -> None:
    cluster = Cluster()
    cluster.add_node("slow", {"CPU": 4}, {"tier": "slow"})
    _fill(cluster, "slow")
    request = make_actor("a", label_selector={"tier": "fast"}, fallback_strategy=_options({"tier": "slow"}))
    pending = cluster.submit(request)
    assert isinstance(pending, Pending)
    assert pending.reasons == {"Insufficient CPU": 1}, "it waits on the fallback"
    cluster.add_node("fast", {"CPU": 4}, {"tier": "fast"})
    assert cluster.placements()["a"] == "fast"
    assert cluster.pending() == []


def test_a_relabel_that_enables_the_primary_wins_over_the_fallback_being_waited_on() -> None:
    cluster = _tiered_cluster()
    _fill(cluster, "slow")
    request = make_actor("a", label_selector={"tier": "gold"}, fallback_strategy=_options({"tier": "slow"}))
    assert isinstance(cluster.submit(request), Pending)
    cluster.set_labels("other", {"tier": "gold"})
    assert cluster.placements()["a"] == "other"


def test_freeing_the_fallback_places_the_actor_there_while_the_primary_is_still_full() -> None:
    cluster = _tiered_cluster()
    _fill(cluster, "fast", "slow")
    request = make_actor("a", label_selector={"tier": "fast"}, fallback_strategy=_options({"tier": "slow"}))
    assert isinstance(cluster.submit(request), Pending)
    cluster.remove_actor("busy-slow")
    assert cluster.placements()["a"] == "slow"


# placement groups


def _accelerator_cluster(a100: int = 4, h100: int = 0) -> Cluster:
    cluster = Cluster()
    for index in range(a100):
        cluster.add_node(f"a100-{index}", {"CPU": 4}, accelerator_type="A100")
    for index in range(h100):
        cluster.add_node(f"h100-{index}", {"CPU": 4}, accelerator_type="H100")
    return cluster


ACC = "corral.io/accelerator-type"


def _accelerator_group(
    strategy: Any = "PACK", fallbacks: list[BundleFallbackOption] | None = None
) -> PlacementGroupRequest:
    """Prefer 2 bundles on H100 nodes, fall back to 4 bundles on A100 nodes."""
    default: list[BundleFallbackOption] = [{"bundles": [{"CPU": 1}] * 4, "bundle_label_selector": [{ACC: "A100"}] * 4}]
    return PlacementGroupRequest(
        "pg",
        [{"CPU": 1}] * 2,
        strategy,
        bundle_label_selector=[{ACC: "H100"}] * 2,
        fallback_strategy=default if fallbacks is None else fallbacks,
    )


@pytest.mark.parametrize(
    "strategy",
    ["PACK", "SPREAD", "STRICT_SPREAD"],
    ids=[
        "a PACK group falls back to the fallback's four bundles",
        "a SPREAD group falls back to the fallback's four bundles",
        "a STRICT_SPREAD group falls back to four distinct A100 nodes",
    ],
)
def test_a_group_uses_the_fallback_bundles_when_the_primary_selector_matches_no_node(strategy: Any) -> None:
    cluster = _accelerator_cluster()
    decision = cluster.create_placement_group(_accelerator_group(strategy))
    assert isinstance(decision, Placed)
    nodes = cluster.placement_groups()["pg"]
    assert len(nodes) == 4
    assert decision.bundle_nodes == nodes
    assert all(node.startswith("a100-") for node in nodes)
    if strategy == "STRICT_SPREAD":
        assert len(set(nodes)) == 4


def test_a_group_uses_the_primary_when_it_can_be_placed() -> None:
    cluster = _accelerator_cluster(a100=4, h100=1)
    assert cluster.create_placement_group(_accelerator_group()) == Placed("pg", bundle_nodes=["h100-0", "h100-0"])


@pytest.mark.parametrize(
    ("h100", "full"),
    [(1, ()), (2, ("h100-0", "h100-1")), (2, ("h100-1",))],
    ids=[
        "a primary that could place only one of its two spread bundles gives way to the fallback",
        "a primary whose nodes are all full gives way to the fallback with room",
        "a primary with room for only one of its two spread bundles gives way to the fallback",
    ],
)
def test_a_group_falls_back_unless_all_primary_bundles_can_be_placed_now(h100: int, full: tuple[str, ...]) -> None:
    cluster = _accelerator_cluster(a100=4, h100=h100)
    _fill(cluster, *full)
    decision = cluster.create_placement_group(_accelerator_group("STRICT_SPREAD"))
    assert isinstance(decision, Placed)
    assert sorted(decision.bundle_nodes) == ["a100-0", "a100-1", "a100-2", "a100-3"]


def test_a_group_skips_an_infeasible_fallback_for_a_later_one() -> None:
    cluster = _accelerator_cluster(a100=4)
    fallbacks: list[BundleFallbackOption] = [
        {"bundles": [{"CPU": 1}] * 3, "bundle_label_selector": [{ACC: "V100"}] * 3},
        {"bundles": [{"CPU": 2}] * 2, "bundle_label_selector": [{ACC: "A100"}] * 2},
    ]
    decision = cluster.create_placement_group(_accelerator_group("STRICT_SPREAD", fallbacks))
    assert isinstance(decision, Placed)
    assert len(decision.bundle_nodes) == 2
    assert len(set(decision.bundle_nodes)) == 2


def test_a_group_that_fits_nowhere_now_reports_the_first_feasible_option() -> None:
    cluster = _accelerator_cluster(a100=2)
    _fill(cluster, "a100-0", "a100-1")
    decision = cluster.create_placement_group(_accelerator_group())
    assert isinstance(decision, Pending)
    assert decision.reasons == {"Insufficient CPU": 2}
    assert cluster.placement_groups() == {}


def test_a_group_with_no_feasible_option_reports_the_primarys_reasons() -> None:
    cluster = _accelerator_cluster(a100=2)
    fallbacks: list[BundleFallbackOption] = [{"bundles": [{"CPU": 8}], "bundle_label_selector": [{ACC: "A100"}]}]
    decision = cluster.create_placement_group(_accelerator_group(fallbacks=fallbacks))
    assert isinstance(decision, Pending)
    assert decision.reasons == {BUNDLE_SELECTOR: 2}


def test_a_waiting_group_retries_from_its_primary() -> None:
    cluster = _accelerator_cluster(a100=1)
    _fill(cluster, "a100-0")
    fallbacks: list[BundleFallbackOption] = [{"bundles": [{"CPU": 1}] * 4}]
    pending = cluster.create_placement_group(_accelerator_group(fallbacks=fallbacks))
    assert isinstance(pending, Pending)
    assert pending.reasons == {"Insufficient CPU": 1}, "it waits on the fallback, which any node may take"
    cluster.add_node("h100-0", {"CPU": 4}, accelerator_type="H100")
    assert cluster.placement_groups() == {"pg": ["h100-0", "h100-0"]}, "the primary's two bundles, not four"
