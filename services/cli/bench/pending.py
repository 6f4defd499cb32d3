"""`corral bench pending`: how fast a burst of waiting actors drains, and what it costs unrelated requests.

The cluster has `--nodes` batch nodes (32 CPUs each) held full by one placement group, and a tenth as many
service nodes (16 CPUs) tainted `service` so only the unrelated requests, which tolerate it, run there.
`--pending` actors (1 CPU and 1 to `--shapes` GiB of memory, no toleration) wait, folded from events. Then:

1. a stream of `--unrelated` requests is decided while they wait: each submits an actor on the service nodes
   and removes the one submitted ten requests earlier, so resources are freed and taken all the time;
2. one event frees room for all of them: the placement group is removed, and the drain is timed until no
   actor waits any more;
3. the same stream again, after the drain.

Each request's decision (a `submit` or `remove_actor` call) is timed. It prints the drain seconds and the
unrelated requests' p50 and p99 beside the targets, and asserts nothing. Everything runs in this process on
the core (`services.core.Cluster`), as the scheduler runs it; a request arriving during the drain waits for it.
"""

from __future__ import annotations

import argparse
import gc
import json
import time

from schemas import (
    ActorPending,
    ActorSubmitted,
    AnyEvent,
    NodeRegistered,
    PlacementGroupPlaced,
    PlacementGroupSubmitted,
)
from services.cli.args import positive_int
from services.cli.bench.burst import (
    BATCH_NODE,
    BLOCKER,
    KEPT,
    SERVICE,
    SERVICE_NODE,
    Measured,
    batch_nodes,
    blocker,
    service_nodes,
    unrelated_request,
    waiting_request,
)
from services.cli.bench.pending_mesh import run_mesh
from services.cli.bench.workloads import percentile
from services.cli.output import add_output_argument
from services.cli.registry import Subcommands
from services.core import Cluster
from services.core.decide.actor import explain_actor
from services.core.request import CompiledRequest
from services.core.state import replay

DRAIN_TARGET_S = 5.0
P99_TARGET_MS = 50.0
SEED = 42


def cluster_events(nodes: int) -> list[AnyEvent]:
    """The batch nodes held full by the blocking placement group, and the tainted service nodes."""
    events: list[AnyEvent] = []
    batch = batch_nodes(nodes)
    for node_id in batch:
        events.append(NodeRegistered(node_id=node_id, resources={**BATCH_NODE, "memory": 256.0}, labels={"pool": "b"}))
    for node_id in service_nodes(nodes):
        events.append(NodeRegistered(node_id=node_id, resources=SERVICE_NODE, labels={"pool": "s"}, taints=[SERVICE]))
    group = blocker(nodes)
    events += [PlacementGroupSubmitted(request=group), PlacementGroupPlaced(pg_id=BLOCKER, bundle_nodes=batch)]
    return events


def setup(args: argparse.Namespace) -> Cluster:
    """A cluster whose batch nodes are full and `--pending` actors wait (their explanation computed once)."""
    events = cluster_events(args.nodes)
    explanation = explain_actor(replay(events, SEED), CompiledRequest(waiting_request(0, args.shapes), ()))
    for index in range(args.pending):
        request = waiting_request(index, args.shapes)
        events += [ActorSubmitted(request=request), ActorPending(actor_id=request.actor_id, explanation=explanation)]
    return Cluster.from_view(replay(events, SEED), keep_history=False)


def stream(cluster: Cluster, count: int, start: int) -> list[int]:
    """Decide `count` unrelated requests (a submit, then the removal of an older one); each one's nanoseconds."""
    timings: list[int] = []
    clock = time.perf_counter_ns
    for index in range(start, start + count):
        request = unrelated_request(index)
        began = clock()
        cluster.decided(lambda: cluster.submit(request))  # noqa: B023 - called at once
        timings.append(clock() - began)
        if index - KEPT >= start:
            began = clock()
            cluster.decided(lambda: cluster.remove_actor(unrelated_request(index - KEPT).actor_id))  # noqa: B023
            timings.append(clock() - began)
    return timings


def milliseconds(nanoseconds: int) -> float:
    """Nanoseconds as milliseconds, to two places."""
    return round(nanoseconds / 1e6, 2)


def run_core(args: argparse.Namespace) -> Measured:
    """Build the cluster, time the stream, the drain and the stream again, all on the core in this process."""
    cluster = setup(args)
    gc.collect()
    gc.freeze()
    before = stream(cluster, args.unrelated, 0)
    began, cpu = time.perf_counter(), time.process_time()
    cluster.decided(lambda: cluster.remove_placement_group(BLOCKER))
    drain, drain_cpu = time.perf_counter() - began, time.process_time() - cpu
    after = stream(cluster, args.unrelated, args.unrelated)
    gc.unfreeze()
    return Measured(round(drain, 2), len(cluster.view.pending), before, after, drain_cpu_s=round(drain_cpu, 2))


def run(args: argparse.Namespace) -> int:
    """Measure on the core (or through a mesh) and print the figures."""
    measured = run_mesh(args) if args.mesh else run_core(args)
    timings = sorted(measured.before + measured.after)
    figures = {
        "where": "mesh" if args.mesh else "core",
        "nodes": args.nodes,
        "pending": args.pending,
        "shapes": args.shapes,
        "drain_s": measured.drain_s,
        "drain_cpu_s": measured.drain_cpu_s,
        "still_pending": measured.still_pending,
        "unrelated_requests": len(timings),
        "unrelated_ms_p50": milliseconds(percentile(timings, 0.5)),
        "unrelated_ms_p99": milliseconds(percentile(timings, 0.99)),
        "waiting_ms_p99": milliseconds(percentile(sorted(measured.before), 0.99)),
        "during_drain_requests": len(measured.during),
        "during_drain_ms_max": milliseconds(max(measured.during, default=0)),
        "drain_target_s": DRAIN_TARGET_S,
        "p99_target_ms": P99_TARGET_MS,
    }
    if args.output == "json":
        print(json.dumps(figures))
        return 0
    cpu = f" ({measured.drain_cpu_s} s of CPU)" if measured.drain_cpu_s is not None else ""
    print(
        f"corral bench pending ({figures['where']}): {args.pending:,} waiting actors in {args.shapes} shapes, "
        f"{args.nodes:,} batch nodes, {len(timings)} unrelated requests"
    )
    print(f"  drain: {measured.drain_s} s{cpu} until {measured.still_pending} wait (target <= {DRAIN_TARGET_S:g} s)")
    print(
        f"  unrelated requests: p50 {figures['unrelated_ms_p50']} ms, p99 {figures['unrelated_ms_p99']} ms "
        f"(while the burst waits: p99 {figures['waiting_ms_p99']} ms; target < {P99_TARGET_MS:g} ms)"
    )
    if args.mesh:
        print(
            f"  during the drain: {len(measured.during)} unrelated requests, the slowest "
            f"{figures['during_drain_ms_max']} ms"
        )
    return 0


def add_parsers(commands: Subcommands) -> None:
    """`corral bench pending`."""
    parser = commands.add_parser(
        "pending",
        help="drain seconds of a burst of waiting actors, and unrelated requests' latency",
        description=__doc__,
    )
    add_output_argument(parser, ("table", "json"))
    parser.add_argument("--nodes", type=positive_int, default=1000, help="batch nodes (default: 1000)")
    parser.add_argument("--pending", type=positive_int, default=20000, help="waiting actors (default: 20000)")
    parser.add_argument("--shapes", type=positive_int, default=4, help="distinct shapes among them (default: 4)")
    parser.add_argument(
        "--unrelated",
        type=positive_int,
        default=200,
        help="unrelated submits before and after the drain (default: 200)",
    )
    parser.add_argument(
        "--mesh", action="store_true", help="through an embedded mesh (local nats-server and redis-server)"
    )
    parser.set_defaults(run=run, parser=parser)
