"""`corral bench autoscaler`: milliseconds per planning round of the autoscaler's planner (services.core.autoscale).

The view holds `--nodes` existing nodes (every tenth with GPUs and a taint; each one busy but for 2 CPUs), the
last fifth of them launched by the autoscaler, 50 launches still pending, and `--pending` pending requests in
`--shapes` distinct shapes (resources, label selector with or without a fallback, tolerations; every tenth shape
a placement group); the configuration has `--types` node types. Each round is one `plan(...)` call on the same
view, timed; it prints the figures (the target beside them) and asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time

from schemas import (
    ActorPlaced,
    ActorSubmitted,
    AnyEvent,
    NodeRegistered,
    PlacementGroupRequest,
    PlacementGroupSubmitted,
    PlacementStrategy,
    ScheduleRequest,
    SelectorSpec,
    Taint,
)
from services.cli.args import positive_int
from services.cli.output import add_output_argument
from services.cli.registry import Subcommands
from services.core.autoscale import Fleet, NodeType, ProviderConfig, ScalePlan, ScalingConfig, plan
from services.core.labels import NODE_ID, NODE_TYPE
from services.core.state import ClusterView, replay

TARGET_MS = 200.0
"""The target per round, on the 2-core development machine."""
RARE = ("GPU",)
ZONES = 5
POOLS = 4
LAUNCHING = 50
GPU_TAINT = Taint("gpu", "true")


def node_types(count: int) -> dict[str, NodeType]:
    """`count` types: CPU nodes of 4..64 CPUs over the pools and zones, every fifth a tainted GPU type."""
    types = {}
    for index in range(count):
        name = f"t{index:02d}"
        cpu = float(4 << (index % 5))
        gpu = index % 5 == 4
        resources = {"CPU": cpu, "memory": cpu * 4, **({"GPU": 4.0} if gpu else {})}
        labels = {"pool": f"p{index % POOLS}", "zone": f"z{index % ZONES}"}
        taints = (GPU_TAINT,) if gpu else ()
        types[name] = NodeType(name, resources, labels, taints, 0, 1000, cpu * (3 if gpu else 1))
    return types


def existing_nodes(count: int, types: dict[str, NodeType]) -> tuple[list[AnyEvent], dict[str, tuple[str, ...]]]:
    """The nodes (each with a placed actor leaving 2 CPUs free), and the last fifth as the autoscaler's fleet."""
    events: list[AnyEvent] = []
    names = list(types)
    running: dict[str, list[str]] = {}
    for index in range(count):
        node_id = f"node-{index:05d}"
        gpu = index % 10 == 9
        resources = {"CPU": 16.0, "memory": 64.0, **({"GPU": 4.0} if gpu else {})}
        labels = {"pool": f"p{index % POOLS}", "zone": f"z{index % ZONES}", NODE_ID: node_id}
        if index >= count * 4 // 5:
            name = names[index % len(names)]
            labels[NODE_TYPE] = name
            running.setdefault(name, []).append(node_id)
        taints = [GPU_TAINT, Taint("rare-resource.corral.io/gpu", "true")] if gpu else []
        events.append(NodeRegistered(node_id=node_id, resources=resources, labels=labels, taints=taints))
        busy = ScheduleRequest(f"busy-{index:05d}", {"CPU": 14.0, "memory": 32.0})
        events += [ActorSubmitted(request=busy), ActorPlaced(actor_id=busy.actor_id, node_id=node_id)]
    return events, {name: tuple(ids) for name, ids in running.items()}


def pending_work(pending: int, shapes: int) -> list[AnyEvent]:
    """`pending` submissions spread evenly over `shapes` distinct shapes."""
    events: list[AnyEvent] = []
    for index in range(pending):
        shape = index % shapes
        cpu = float(1 + shape % 8)
        resources = {"CPU": cpu, "memory": float(1 + shape), **({"GPU": 1.0} if shape % 7 == 6 else {})}
        selector: SelectorSpec = {"pool": f"p{shape % POOLS}"} if shape % 3 == 0 else {}
        tolerations: SelectorSpec = {"gpu": "exists()"} if shape % 7 == 6 else {}
        if shape % 10 == 9:
            strategy: PlacementStrategy = "STRICT_SPREAD" if shape % 20 == 9 else "STRICT_PACK"
            group = PlacementGroupRequest(
                f"pg-{index:05d}", [resources] * (2 + shape % 3), strategy, tolerations=tolerations
            )
            events.append(PlacementGroupSubmitted(request=group))
            continue
        fallback = [{"label_selector": {"zone": f"z{shape % ZONES}"}}] if shape % 4 == 1 else []
        request = ScheduleRequest(
            f"work-{index:05d}",
            resources,
            label_selector={"zone": "nowhere"} if fallback else selector,
            fallback_strategy=fallback,  # type: ignore[arg-type]
            tolerations=tolerations,
        )
        events.append(ActorSubmitted(request=request))
    return events


def setup(args: argparse.Namespace) -> tuple[ClusterView, ScalingConfig, Fleet]:
    """The view, configuration and fleet every round plans on."""
    types = node_types(args.types)
    events, running = existing_nodes(args.nodes, types)
    events += pending_work(args.pending, args.shapes)
    launching = {name: tuple(f"launch-{name}-{i}" for i in range(LAUNCHING // len(types))) for name in types}
    config = ScalingConfig(ProviderConfig("local"), types)
    return replay(events), config, Fleet(running=running, launching=launching)


def run(args: argparse.Namespace) -> int:
    """Plan `--rounds` times on the same view and print the figures."""
    view, config, fleet = setup(args)
    gc.collect()
    gc.freeze()  # the view is long-lived: keep the collector from re-walking it in every round
    timings: list[float] = []
    result: ScalePlan | None = None
    for _ in range(args.rounds):
        started = time.perf_counter()
        result = plan(view, config, fleet, RARE)
        timings.append((time.perf_counter() - started) * 1000)
    gc.unfreeze()
    assert result is not None
    figures = {
        "nodes": args.nodes,
        "pending": args.pending,
        "shapes": args.shapes,
        "types": args.types,
        "demand_groups": len(result.demand),
        "launches": sum(launch.count for launch in result.launches),
        "ms_per_round_median": round(statistics.median(timings), 1),
        "ms_per_round_max": round(max(timings), 1),
        "target_ms": TARGET_MS,
    }
    if args.output == "json":
        print(json.dumps(figures))
        return 0
    print(
        f"corral bench autoscaler: {args.pending:,} pending requests in {args.shapes} shapes, "
        f"{args.types} node types, {args.nodes:,} existing nodes, {args.rounds} rounds"
    )
    print(
        f"  {figures['ms_per_round_median']} ms per round (median; max {figures['ms_per_round_max']} ms), "
        f"target <= {TARGET_MS:g} ms"
    )
    print(f"  {figures['demand_groups']} demand groups; {figures['launches']} nodes launched in a round")
    return 0


def add_parsers(commands: Subcommands) -> None:
    """`corral bench autoscaler`."""
    parser = commands.add_parser(
        "autoscaler", help="milliseconds per planning round of the autoscaler's planner", description=__doc__
    )
    add_output_argument(parser, ("table", "json"), json=True)
    parser.add_argument("--nodes", type=positive_int, default=5000, help="existing nodes (default: 5000)")
    parser.add_argument("--pending", type=positive_int, default=10000, help="pending requests (default: 10000)")
    parser.add_argument("--shapes", type=positive_int, default=100, help="distinct request shapes (default: 100)")
    parser.add_argument("--types", type=positive_int, default=20, help="node types (default: 20)")
    parser.add_argument("--rounds", type=positive_int, default=5, help="timed planning rounds (default: 5)")
    parser.set_defaults(run=run, parser=parser)
