"""Proposals decided against one view and checked against another (the decision workers and their applier)."""

from __future__ import annotations

from schemas import ActorPlaced, Pending, Placed, ScheduleRequest
from services.core import Cluster
from services.core.prng import SplitMix64
from services.core.state.snapshot import digest


def _pair(cpus: float = 1.0, nodes: int = 1) -> tuple[Cluster, Cluster]:
    """An allocator's cluster and a proposer's cluster folded from the same events."""
    allocator = Cluster()
    for index in range(nodes):
        allocator.add_node(f"n{index}", {"CPU": cpus})
    return allocator, Cluster.from_events(allocator.events())


def test_a_proposal_the_allocator_agrees_with_is_placed_as_proposed_and_replays_alike() -> None:
    allocator, proposer = _pair(nodes=3)
    request = ScheduleRequest("a", {"CPU": 1})
    node = proposer.propose(request, SplitMix64(7), {})
    assert node is not None
    assert proposer.events() == allocator.events()  # proposing changes nothing
    decision = allocator.submit_proposed(request, node, prng=5, folded=9)
    assert isinstance(decision, Placed) and decision.node_id == node
    (placed,) = [e for e in allocator.events() if isinstance(e, ActorPlaced)]
    assert (placed.prng, placed.folded, placed.request) == (5, 9, request)
    assert digest(Cluster.from_events(allocator.events()).view) == digest(allocator.view)


def test_two_proposers_racing_for_the_last_room_place_one_actor_and_the_other_is_refused() -> None:
    allocator, first = _pair()
    second = Cluster.from_events(allocator.events())
    a, b = ScheduleRequest("a", {"CPU": 1}), ScheduleRequest("b", {"CPU": 1})
    node_a, node_b = first.propose(a, SplitMix64(1), {}), second.propose(b, SplitMix64(2), {})
    assert node_a == node_b == "n0"
    assert isinstance(allocator.submit_proposed(a, "n0", prng=0, folded=0), Placed)
    before = allocator.events()
    assert allocator.submit_proposed(b, "n0", prng=0, folded=0) is None
    assert allocator.events() == before  # a refused proposal changes nothing
    assert allocator.view.nodes["n0"].free["CPU"] == 0


def test_a_batch_of_proposals_counts_what_its_earlier_proposals_took() -> None:
    _allocator, proposer = _pair(nodes=1, cpus=1)
    taken: dict[str, dict[str, float]] = {}
    assert proposer.propose(ScheduleRequest("a", {"CPU": 1}), SplitMix64(0), taken) == "n0"
    assert taken == {"n0": {"CPU": 1.0}}
    assert proposer.propose(ScheduleRequest("b", {"CPU": 1}), SplitMix64(0), taken) is None


def test_a_live_id_or_a_placement_group_bundle_is_left_to_the_allocator_which_decides_it_as_submit_does() -> None:
    allocator, _proposer = _pair()
    request = ScheduleRequest("a", {"CPU": 1})
    first = allocator.submit(request)
    proposer = Cluster.from_events(allocator.events())
    assert proposer.propose(request, SplitMix64(0), {}) is None
    assert allocator.submit_proposed(request, "elsewhere", prng=0, folded=0) == first
    too_big = ScheduleRequest("big", {"CPU": 4})
    assert proposer.propose(too_big, SplitMix64(0), {}) is None
    assert isinstance(allocator.submit_proposed(too_big, "missing", prng=0, folded=0), type(None))
    assert isinstance(allocator.submit(too_big), Pending)
