"""A launch's decision split into events under the message budget: the parts hold the whole launch (every launch id
once, every nomination, each launch's work), each part encodes under the budget, and folding the parts gives the
launches and nominations one event for the whole launch gives."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import (
    ActorPending,
    ActorSubmitted,
    AnyEvent,
    Explanation,
    LaunchesNominated,
    NodesLaunchRequested,
    ScheduleRequest,
)
from services.autoscaler.handlers import DEFAULT_BUDGET, Decider
from services.autoscaler.split import existing_parts, launch_parts, message_budget, nomination_parts
from services.core import replay
from services.core.autoscale import parse_config
from services.core.state import ClusterView, Resources
from services.runtime.codec import encode
from tests.support.examples import examples

work_ids = st.text("abcdefghij", min_size=1, max_size=253)
amounts = st.dictionaries(st.sampled_from(["CPU", "GPU", "memory"]), st.floats(0.5, 64.0), min_size=1, max_size=3)
nodes = st.lists(st.dictionaries(work_ids, amounts, max_size=40), min_size=1, max_size=30)
budgets = st.integers(1_500, 20_000)

TEMPLATE = NodesLaunchRequested(node_type="cpu-4", launch_ids=[], reason="pending work", requested_at=5.0)


def numbered() -> itertools.count[int]:
    return itertools.count(1)


def split(puts: list[dict[str, Resources]], budget: int) -> list[NodesLaunchRequested | LaunchesNominated]:
    counter = numbered()
    per_node = [(f"L{k + 1}", sorted(put), put) for k, put in enumerate(puts)]
    return launch_parts(TEMPLATE, per_node, budget, lambda: f"autoscaler-{next(counter):032x}")


def nominations_of(parts: list[NodesLaunchRequested | LaunchesNominated]) -> dict[str, dict[str, Resources]]:
    found: dict[str, dict[str, Resources]] = {}
    for part in parts:
        for launch_id, put in part.nominated.items():
            for work_id, amount in put.items():
                assert work_id not in found.get(launch_id, {}), f"{work_id} nominated twice to {launch_id}"
                found.setdefault(launch_id, {})[work_id] = amount
    return found


@settings(max_examples=examples(150), deadline=None)
@given(puts=nodes, budget=budgets)
def test_the_parts_of_a_launch_hold_it_whole_each_under_the_budget(
    puts: list[dict[str, Resources]], budget: int
) -> None:
    parts = split(puts, budget)
    ids = [f"L{k + 1}" for k in range(len(puts))]
    requested = [part for part in parts if isinstance(part, NodesLaunchRequested)]
    assert [launch_id for part in requested for launch_id in part.launch_ids] == ids
    assert nominations_of(parts) == {launch_id: put for launch_id, put in zip(ids, puts, strict=True) if put}
    assert all(len(encode(part)) <= budget for part in parts), [len(encode(part)) for part in parts]
    assert len({part.event_id for part in parts}) == len(parts)
    for part in requested:
        assert set(part.nominated) <= set(part.launch_ids)
        assert set(part.work) == {work_id for put in part.nominated.values() for work_id in put}
        assert part.node_type == "cpu-4" and part.reason == "pending work" and part.requested_at == 5.0


@settings(max_examples=examples(60), deadline=None)
@given(puts=nodes, budget=budgets)
def test_folding_the_parts_gives_the_launches_and_nominations_of_the_whole(
    puts: list[dict[str, Resources]], budget: int
) -> None:
    pending: list[AnyEvent] = []
    for work_id in sorted({work_id for put in puts for work_id in put}):
        pending += [
            ActorSubmitted(request=ScheduleRequest(work_id, {"CPU": 1})),
            ActorPending(actor_id=work_id, explanation=Explanation(0, "waits")),
        ]
    whole = split(puts, 10**9)
    assert len(whole) == 1
    by_whole, by_parts = replay([*pending, *whole]), replay([*pending, *split(puts, budget)])
    assert launches_of(by_parts) == launches_of(by_whole)
    assert by_parts.nominations == by_whole.nominations
    for launch_id, launch in by_parts.launches.items():  # its own work at least (the whole lists every launch's)
        assert set(launch.nominated) <= set(launch.work) <= set(by_whole.launches[launch_id].work)
    assert by_parts.launch_count == by_whole.launch_count == len(puts)


def launches_of(view: ClusterView) -> dict[str, tuple[str, str, dict[str, Resources]]]:
    """Each launch's type, state and nominations."""
    return {
        launch_id: (launch.node_type, launch.state, launch.nominated) for launch_id, launch in view.launches.items()
    }


def test_nominations_of_one_launch_over_the_budget_are_spread_over_several_events() -> None:
    put = {f"{'w' * 200}{k:04d}": {"CPU": 1.0} for k in range(50)}
    parts = nomination_parts({"L1": put}, 2_000, lambda: "autoscaler-" + "0" * 32)
    assert len(parts) > 1 and all(len(encode(part)) <= 2_000 for part in parts)
    assert nominations_of(list(parts)) == {"L1": put}


def test_the_budget_keeps_under_the_readers_limit_and_the_servers_less_its_headers() -> None:
    assert message_budget(262_144, 1_048_576) <= 262_144 - 262_144 // 16
    assert message_budget(10**8, 1_048_576) <= 1_048_576 - 1024


CONFIG = """
node_types:
  big:
    resources: {CPU: 2000}
    max_workers: 50
"""


def test_a_round_for_10000_pieces_of_work_with_the_longest_ids_decides_events_under_the_budget() -> None:
    """5 nodes (the round's most) of 2,000 actors each, ids of 253 characters: one node's nominations alone are
    over the budget."""
    events: list[AnyEvent] = []
    for k in range(10_000):
        actor_id = f"{k:05d}" + "x" * 248
        events += [
            ActorSubmitted(request=ScheduleRequest(actor_id, {"CPU": 1})),
            ActorPending(actor_id=actor_id, explanation=Explanation(0, "waits")),
        ]
    view = replay(events)
    decided = Decider(parse_config(CONFIG), (), 1.0).decide(view, 1.0, {}).events
    assert max(len(encode(event)) for event in decided) <= DEFAULT_BUDGET
    for event in decided:
        view.fold(event)
    assert len(view.launches) == 5
    assert sorted(view.nominations) == sorted(view.pending)


@settings(max_examples=examples(100), deadline=None)
@given(
    on_nodes=st.dictionaries(
        st.sampled_from([f"L{k}" for k in range(8)]),
        st.dictionaries(work_ids, st.dictionaries(work_ids, amounts, max_size=10), max_size=4),
    )
)
def test_existing_node_room_is_held_in_parts_under_the_budget_each_launch_whole_or_not_at_all(
    on_nodes: dict[str, dict[str, dict[str, Resources]]],
) -> None:
    parts = existing_parts(on_nodes, 3_000, lambda: "autoscaler-" + "0" * 32)
    assert all(len(encode(part)) <= 3_000 and part.nominated == {} for part in parts)
    found = {launch_id: on for part in parts for launch_id, on in part.existing.items()}
    assert sum(len(part.existing) for part in parts) == len(found)
    assert all(found[launch_id] == on_nodes[launch_id] for launch_id in found)
    small = {launch_id for launch_id, on in on_nodes.items() if len(encode({launch_id: on})) < 2_800}
    assert small <= set(found)
