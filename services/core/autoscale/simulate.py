"""Check a round's bin packing with the scheduler's own decisions, and correct it (pure).

The planner packs demand first-fit decreasing; the scheduler places one piece of work at a time with its own
policy (DEFAULT fills a node to half, then spreads), so the two can disagree. Once the bins are chosen, the work
put on them is placed again by `place_actor` and `decide_group`, on every bin at once (as the nodes will be when
they register), in the order the scheduler re-tries pending work (the root's, then each virtual cluster's; by
priority, then arrival): work it leaves unplaced gets more nodes of the type the packing chose for it (doubling),
else planned nodes it leaves empty are dropped and it replays again (fewer nodes change its choices), three
replays at most; if the replay without them leaves work unplaced, the one before stands (its loads are what the
nodes are nominated for) and they are dropped after it. Once all of it is placed, the planned nodes with the fewest
loads are each tried away (the work replayed without them).

Replayed: root-scope actors and placement groups, DataFlow operations (after the footprints of the upstream
operations the replay placed: `replay_scopes.Footprints`), and actors of a top-level virtual cluster, growing
its flexible nodes onto the bins as `borrow` does (`replay_scopes.Growth`). Not replayed (they keep the
packing's places): a queued virtual cluster's admission (its parent grows over its nodes in hash-ring order, and
the ids of launched nodes are not known yet).

The replay's loads are what each launch's node is then nominated for (`NodesLaunchRequested.nominated`): the
scheduler tries that work there first (an actor of a top-level virtual cluster: its cluster's flexible node there)
and holds its room from other work and from virtual clusters' admissions, so how it breaks ties between equally
good nodes (its PRNG is its own) no longer matters for the work counted here, whatever order the nodes register
in. Work beyond `REPLAYED_AT_MOST` is nominated where the packing put it. A queued cluster's admission is not
nominated: it carves its minimum where it finds room that is not held (nor quota a nominated actor of its parent
holds), and work it strands is counted again by the next round.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Final

from services.core.autoscale.bins import Bin, Bins
from services.core.autoscale.demand import ActorDemand, Demand
from services.core.autoscale.gangs import GangDemand, GroupDemand
from services.core.autoscale.replay_scopes import Footprints, Growth, copied
from services.core.cluster import DEFAULT_SAMPLE
from services.core.decide.actor import place_actor
from services.core.decide.group import decide_group
from services.core.prng import SplitMix64
from services.core.state import ClusterView, NodeState, Resources, give
from services.core.state.model import Launch
from services.core.state.nominations import end_work, priority_of

CORRECTIONS: Final = 3
"""Rounds of "place again; where work is left unplaced, launch as many more nodes of its type as are planned
already (at least one per piece of work), else drop the nodes left empty" before the plan stands as it is."""
TRIMS: Final = 3
"""Planned nodes the replayed work is tried without, per round (each try replays once or twice)."""
REPLAYED_AT_MOST: Final = 256
"""Work placed again per round, the first in the scheduler's order (it bounds a round's cost); the rest keeps the
packing's places, and a later round corrects what that got wrong. `corral bench autoscaler` (10,000 pending in
100 shapes, 20 types, 5,000 nodes) took about 20 ms more per round at 256 than at 128, under the 200 ms target;
each extra correction costs one more replay (about 20 ms there), so `CORRECTIONS` stays at 3."""


@dataclass
class Put:
    """Work the packing put on bins: its demand, its id, and the bins (with the amount on each; a placement group
    mixing existing free room in also names stand-ins of those existing nodes)."""

    demand: Demand
    work_id: str
    on: list[tuple[Bin, Resources]]

    @property
    def simulated(self) -> bool:
        """Whether the scheduler's decision can be replayed here: root-scope work (DataFlow operations included,
        after the footprints of the upstream operations the replay placed) and actors of a top-level virtual
        cluster (growing onto the bins); not a virtual cluster's admission."""
        demand = self.demand
        if isinstance(demand, GroupDemand):
            return not demand.scope.scope_id
        if isinstance(demand, ActorDemand):
            return demand.chain is None or not demand.chain.vc.parent
        return False


def puts_of(bins: Bins, served: list[Demand]) -> list[Put]:
    """What the packing put where, in the order the scheduler re-tries pending work: by scope, then priority, then
    arrival."""
    where: dict[str, list[tuple[Bin, Resources]]] = {}
    for targets in bins.open.values():
        for target in targets:
            for work_id, amount in target.loads:
                where.setdefault(work_id, []).append((target, amount))
    stand_ins: dict[str, Bin] = {}
    for demand in served:
        if isinstance(demand, GangDemand):
            for work_id, pieces in demand.on_existing.items():
                where[work_id] += [(_stand_in(stand_ins, node, amount), amount) for node, amount in pieces]
    puts = [Put(demand, one, where[one]) for demand in served for one in demand.work_ids if one in where]
    return sorted(puts, key=_queue_key)


def _stand_in(stand_ins: dict[str, Bin], node: NodeState, amount: Resources) -> Bin:
    """The replay's copy of an existing node, whose room is what placement groups mixing it with new nodes took
    there (the rest of its free room went to work that is not demand)."""
    target = stand_ins.get(node.node_id)
    if target is None:
        copy = NodeState(node.node_id, node.hash_key, node.total, node.labels)
        copy.set_taints(list(node.taints))
        target = stand_ins[node.node_id] = Bin("", copy, planned=False, room={})
    give(target.room, amount)
    return target


def _queue_key(put: Put) -> tuple[int, int, int]:
    """The scheduler re-tries the root's work first, then each virtual cluster's (in the order they came)."""
    scope = put.demand.scope
    work = scope.actors.get(put.work_id) or scope.groups.get(put.work_id)
    cluster = scope.tree.clusters[scope.scope_id].arrival + 1 if scope.scope_id else 0
    return cluster, -put.demand.priority, work.arrival if work is not None else -1


def correct(view: ClusterView, bins: Bins, puts: list[Put]) -> None:
    """Replace the packing of the simulated work by the scheduler's own placements (see the module's doc)."""
    if not any(put.simulated for put in puts):
        return
    bins.stop_shelving()
    dropped: list[tuple[Bin, int]] = []
    """The empty nodes (with their places) dropped after a replay that placed all the work."""
    for _ in range(CORRECTIONS):
        unplaced = _replay(view, bins, puts)
        if unplaced and dropped:
            break
        short = Counter(next(target.type_name for target, _ in put.on if not target.existing) for put in unplaced)
        extra = {name: min(bins.room_left(name), max(count, bins.planned_count(name))) for name, count in short.items()}
        if any(extra.values()):
            for name, count in extra.items():
                for _ in range(count):
                    bins.launch(name)
            continue
        empty = [target for targets in bins.open.values() for target in targets if _unused(target)]
        if not empty:
            _trim(view, bins, puts)
            return
        dropped = [] if unplaced else [(target, bins.open[target.type_name].index(target)) for target in empty]
        for target in empty:  # fewer nodes change the scheduler's choices: the next round replays again
            bins.drop(target)
    else:  # the last launches or drops, replayed: its loads are what the nodes are nominated for
        unplaced = _replay(view, bins, puts)
    if unplaced and dropped:  # without the empty nodes the scheduler chose worse: back to the replay that placed all
        for target, place in dropped:
            bins.reopen(target, place)
        _replay(view, bins, puts)
    for target in [target for targets in bins.open.values() for target in targets if _unused(target)]:
        bins.drop(target)  # nominated for nothing: the scheduler would leave it empty (the replay's loads stand)


def _trim(view: ClusterView, bins: Bins, puts: list[Put]) -> None:
    """Drop the planned nodes the replayed work can do without, fewest loads first, `TRIMS` tries at most: the
    scheduler, breaking its ties otherwise than the replay, would leave such a node empty."""
    fixed = [put for put in puts if not put.simulated] + [put for put in puts if put.simulated][REPLAYED_AT_MOST:]
    kept = {id(target) for put in fixed for target, _ in put.on}
    trials = sorted(
        (
            target
            for targets in bins.open.values()
            for target in targets
            if target.planned and not target.for_minimum and id(target) not in kept
        ),
        key=lambda target: (len(target.loads), -bins.cost(target.type_name)),
    )
    for target in trials[:TRIMS]:
        place = bins.open[target.type_name].index(target)
        bins.drop(target)
        if _replay(view, bins, puts):
            bins.reopen(target, place)
            _replay(view, bins, puts)
    for target in [target for targets in bins.open.values() for target in targets if _unused(target)]:
        bins.drop(target)


def _unused(target: Bin) -> bool:
    return target.planned and not target.for_minimum and not target.loads


def _replay(view: ClusterView, bins: Bins, puts: list[Put]) -> list[Put]:
    """Empty every bin, put back the work that is not simulated, place the first `REPLAYED_AT_MOST` of the rest
    with the scheduler's decisions, then put back what is left where the packing chose; the puts the scheduler
    could not place (they stay on the bins the packing chose, so their launch is kept)."""
    every = [target for targets in bins.open.values() for target in targets]
    every += dict.fromkeys(target for put in puts for target, _ in put.on if target.existing)
    for target in every:
        target.empty()
    simulated = [put for put in puts if put.simulated]
    replayed, later = simulated[:REPLAYED_AT_MOST], simulated[REPLAYED_AT_MOST:]
    _load([put for put in puts if not put.simulated])
    actors = [put.demand for put in replayed if isinstance(put.demand, ActorDemand)]
    labelled = any(demand.work.request.labels for demand in actors)
    dataflow = any(demand.work.run_after is not None for demand in actors)
    only_bins = _bins_view(view, every, own_indexes=labelled, dataflow=dataflow)
    growths = {
        demand.chain.vc.vc_id: Growth(demand.chain, every, own_indexes=labelled, dataflow=dataflow)
        for demand in actors
        if demand.chain is not None
    }
    by_node = {target.node.node_id: target for target in every}
    prng = SplitMix64(view.seed)
    unplaced = []
    for put in replayed:
        if not _place(only_bins, by_node, growths, put, prng):
            unplaced.append(put)
        elif put.work_id in only_bins.nominations:
            end_work(only_bins, put.work_id)
    _load(unplaced + later)
    return unplaced


def _load(puts: list[Put]) -> None:
    """Put work back where the packing chose."""
    for put in puts:
        for target, amount in put.on:
            target.load(put.work_id, amount)


def _bins_view(view: ClusterView, every: list[Bin], *, own_indexes: bool, dataflow: bool) -> ClusterView:
    """A view whose nodes are the bins only (existing nodes' free room is spent already), with the placed actors'
    domains and footprints of `view` (so affinity rules judge the new nodes as they will be judged); with
    `own_indexes`, copies of the domain indexes, which the replay's placements are counted in; with `dataflow`,
    footprints the replay's placements are recorded in."""
    only_bins = ClusterView(view.seed)
    only_bins.actor_index = copied(view.actor_index) if own_indexes else view.actor_index
    only_bins.anti_index = copied(view.anti_index) if own_indexes else view.anti_index
    only_bins.footprints = Footprints(view) if dataflow else view.footprints
    for target in every:
        only_bins.add_live_node(target.node)
        only_bins.set_taints(target.node, list(target.node.taints))
    _nominate_launching(view, only_bins, every)
    return only_bins


def _nominate_launching(view: ClusterView, only_bins: ClusterView, every: list[Bin]) -> None:
    """The nominations of the launching bins' launches, as the scheduler will have them once those nodes register:
    their work is tried there first, and their room is held from other work of lower or equal priority."""
    for target in every:
        launch = view.launches.get(target.launch_id) if target.launch_id else None
        if launch is None or not launch.nominated:
            continue
        stand_in = Launch(launch.launch_id, launch.node_type, launch.requested_at, launch.reason)
        stand_in.state, stand_in.node_id, stand_in.nominated = "registered", target.node.node_id, dict(launch.nominated)
        only_bins.launches[launch.launch_id] = stand_in
        for work_id, amount in stand_in.nominated.items():
            only_bins.nominations.setdefault(work_id, []).append(launch.launch_id)
            only_bins.held.setdefault(target.node.node_id, {})[work_id] = (priority_of(view, work_id), amount)


def _tried_as(only_bins: ClusterView, own_id: str, work_id: str) -> bool:
    """Whether a demand group's compiled request (its first work's, `own_id`) must be tried as `work_id`'s: when
    `work_id` is nominated, the scheduler tries each piece of work on the nodes nominated for it."""
    return own_id != work_id and work_id in only_bins.nominations


def _place(
    only_bins: ClusterView, by_node: dict[str, Bin], growths: dict[str, Growth], put: Put, prng: SplitMix64
) -> bool:
    """Place one piece of work on the bins as the scheduler would (inside a virtual cluster: by its growth)."""
    demand = put.demand
    if isinstance(demand, ActorDemand):
        if demand.chain is not None:
            return growths[demand.chain.vc.vc_id].place(demand, put.work_id, prng, only_bins)
        work = demand.work
        if _tried_as(only_bins, work.request.actor_id, put.work_id):
            work = work.renamed(put.work_id)
        placed = place_actor(only_bins, work, prng, DEFAULT_SAMPLE)
        if placed is None:
            return False
        by_node[placed[0].node_id].load(put.work_id, demand.work.resources)
        if demand.work.request.labels:
            only_bins.index_actor(demand.work.request, placed[0], 1)
        if isinstance(only_bins.footprints, Footprints):
            only_bins.footprints.record(demand, put.work_id, placed[0])
        return True
    assert isinstance(demand, GroupDemand)
    group = demand.work
    if _tried_as(only_bins, group.request.pg_id, put.work_id):
        group = group.renamed(put.work_id)
    decision = decide_group(only_bins, group, prng, DEFAULT_SAMPLE)
    if not isinstance(decision, tuple):
        return False
    option, nodes = decision
    for bundle, node_id in zip(demand.work.options[option].bundles, nodes, strict=True):
        by_node[node_id].load(put.work_id, bundle)
    return True
