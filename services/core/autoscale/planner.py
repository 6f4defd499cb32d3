"""The planner: pending work -> demand groups -> nodes to launch, judged by Corral's own placement rules (pure).

One round, in order: `min_workers` first; then the demand, first-fit decreasing: highest priority first, then the
largest shapes, then the work fewest types serve, then by key (never by arrival). Identical pending work is
grouped before any per-node work. Each group first takes the free capacity of existing nodes (judged by the same
plugins the scheduler runs: what fits there is not demand), then room on nodes already launching or planned in
this round, then new nodes of the cheapest type that passes every node-level rule (options in order: the primary
selector, then each fallback), within each type's `max_workers`, the round's upscaling budget and without the
backed-off types. A gang (a placement group, a queued virtual cluster) that does not fit wholly on free capacity
mixes the three, piece by piece, all or nothing. Last, `simulate` replays the packing with the scheduler's own
decisions and corrects it; each launch's node is nominated for the work then on it (`Launch.nominated`), and so is
each earlier launch's node the round counted work on (`ScalePlan.counted_on`).
"""

from __future__ import annotations

import math
from dataclasses import replace

from services.core.autoscale.bins import Bin, Bins, FreeRooms
from services.core.autoscale.collect import collect
from services.core.autoscale.config import ScalingConfig
from services.core.autoscale.demand import Demand, Verdicts
from services.core.autoscale.plan_types import DemandGroup, Fleet, Launch, ScalePlan, TypeStatus
from services.core.autoscale.simulate import Put, correct, puts_of
from services.core.state import ClusterView, Resources, give


def round_budget(config: ScalingConfig, fleet: Fleet) -> int:
    """How many nodes one round may launch: `max(5, upscaling_speed * running)`."""
    running = sum(len(ids) for ids in fleet.running.values())
    return max(5, math.floor(config.upscaling_speed * running))


def plan(view: ClusterView, config: ScalingConfig, fleet: Fleet, rare_resources: tuple[str, ...] = ()) -> ScalePlan:
    """What to launch this round for the pending work of `view`, and the demand, grouped and explained."""
    bins = Bins(config, fleet, rare_resources, round_budget(config, fleet), view.seed)
    bins.keep_minimum()
    rooms = FreeRooms()
    judged = [(demand, demand.judge(bins)) for demand in collect(view, rare_resources)]
    judged.sort(key=lambda pair: (*pair[0].order(), len(pair[1].served), pair[0].key))
    groups = [_serve(demand, verdicts, bins, rooms) for demand, verdicts in judged]
    served = [demand for demand, _ in judged]
    puts = puts_of(bins, served)
    correct(view, bins, puts)
    return ScalePlan(
        launches=_launches(bins),
        demand=_merged(groups),
        types=tuple(
            TypeStatus(
                name,
                node_type.min_workers,
                node_type.max_workers,
                fleet.running_count(name),
                fleet.launching_count(name),
                bins.planned_count(name),
            )
            for name, node_type in config.node_types.items()
        ),
        held_by=_held_by(bins),
        counted_on=_counted_on(bins),
        existing={target.node.node_id: _put_on(target) for target in _stand_ins(puts) if target.loads},
    )


def _serve(demand: Demand, verdicts: Verdicts, bins: Bins, rooms: FreeRooms) -> DemandGroup:
    """Take free capacity, then room on launching and planned nodes, then new nodes, for one demand group."""
    unmet = demand.take_free(rooms)
    served_by = verdicts.served
    left, waiting = demand.place(bins, verdicts, list(unmet)) if unmet and served_by else (list(unmet), "")
    return DemandGroup(
        kind=demand.kind,
        shape=demand.shape,
        selectors=demand.selectors,
        tolerations=demand.tolerations,
        strategy=demand.strategy,
        work_ids=tuple(demand.work_ids),
        unmet=len(unmet),
        served_by=served_by,
        reasons=verdicts.reasons,
        launching=len(unmet) - len(left),
        waiting="; ".join(part for part in (waiting if left else "", demand.capped) if part),
    )


def _launches(bins: Bins) -> tuple[Launch, ...]:
    found = []
    for name, planned in bins.planned_by_type().items():
        work_ids = tuple(sorted({work_id for node in planned for work_id in node.work_ids}))
        minimum = sum(1 for node in planned if node.for_minimum)
        reasons = []
        if minimum:
            reasons.append(f"min_workers {bins.config.node_types[name].min_workers}")
        if work_ids:
            reasons.append(f"pending work ({len(work_ids)})")
        per_node = tuple(tuple(sorted(node.work_ids)) for node in planned)
        nominated = tuple(_put_on(node) for node in planned)
        found.append(Launch(name, len(planned), work_ids, " and ".join(reasons), per_node, nominated))
    return tuple(found)


def _put_on(node: Bin) -> dict[str, Resources]:
    """Work id -> what the plan put on one planned node for it (the room that node is nominated to hold)."""
    put: dict[str, Resources] = {}
    for work_id, amount in node.loads:
        give(put.setdefault(work_id, {}), amount)
    return dict(sorted(put.items()))


def _stand_ins(puts: list[Put]) -> list[Bin]:
    """The replay's stand-ins of existing nodes (where placement groups mixing them with new nodes went)."""
    return list(dict.fromkeys(target for put in puts for target, _ in put.on if target.existing))


def _held_by(bins: Bins) -> dict[str, tuple[str, ...]]:
    """Work id -> the earlier launches the plan counts it on."""
    held: dict[str, list[str]] = {}
    for targets in bins.open.values():
        for target in targets:
            if target.launch_id:
                for work_id in target.work_ids:
                    held.setdefault(work_id, []).append(target.launch_id)
    return {work_id: tuple(sorted(ids)) for work_id, ids in sorted(held.items())}


def _counted_on(bins: Bins) -> dict[str, dict[str, Resources]]:
    """Launch id -> what the plan put on that earlier launch's node (launches it put nothing on are left out)."""
    return {
        target.launch_id: _put_on(target)
        for targets in bins.open.values()
        for target in targets
        if target.launch_id and target.loads
    }


def _merged(groups: list[DemandGroup]) -> tuple[DemandGroup, ...]:
    """One group per shape, selectors, tolerations and strategy (requests differing elsewhere, in their labels or
    namespace say, were planned apart), ordered by their first work id."""
    merged: dict[str, DemandGroup] = {}
    for group in groups:
        key = repr((group.kind, group.shape, group.selectors, group.tolerations, group.strategy, group.served_by))
        key += repr(sorted(group.reasons.items()))
        same = merged.get(key)
        if same is None:
            merged[key] = group
            continue
        merged[key] = replace(
            same,
            work_ids=tuple(sorted(same.work_ids + group.work_ids)),
            unmet=same.unmet + group.unmet,
            launching=same.launching + group.launching,
            waiting="; ".join(part for part in dict.fromkeys((same.waiting, group.waiting)) if part),
        )
    return tuple(sorted(merged.values(), key=lambda group: group.work_ids[0]))
