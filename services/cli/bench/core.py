"""`corral bench core`: decisions per second of the scheduling core on pre-filled clusters (like scheduler_perf).

Each case (workload, size) starts from a cluster of `size` nodes with 10 actors per node already placed, built
by folding events (`Cluster.from_events`), then times `--decisions` submits (or placement groups) one by one.
The `vclusters` workload also times virtual clusters: `--tenants` clusters admitted, a queue of waiting ones,
`--churn` destroy-and-request rounds, and the same requests inside the clusters and at the root (it runs at
1,000 nodes unless --sizes says otherwise). Every case runs in a fresh subprocess so its peak RSS is its own.
`--evict-mb` writes that much memory between groups of decisions, so they run on cold caches, as on a busy machine.
It prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import subprocess
import sys
import time
from typing import cast

from schemas import PlacementGroupRequest
from services.cli.args import positive_int
from services.cli.bench import vclusters
from services.cli.bench.workloads import (
    ACTORS_PER_NODE,
    WORKLOADS,
    Figures,
    Layout,
    Work,
    Workload,
    build_events,
    percentile,
)
from services.cli.output import add_output_argument
from services.cli.registry import Subcommands
from services.core import Cluster, Pending

SEED = 42
DEFAULT_SIZES = (1000, 5000, 20000)
DEFAULT_SIZES_OF = {"vclusters": (1000,)}
"""Workloads whose default sizes differ (the virtual-cluster case is specified at 1,000 nodes)."""


def progress(text: str) -> None:
    """A progress line on stderr (the figures go to stdout)."""
    print(text, file=sys.stderr, flush=True)


def _time_decisions(cluster: Cluster, requests: list[Work], evict_mb: int = 0, every: int = 1) -> tuple[list[int], int]:
    """Each decision's duration in nanoseconds, and how many of them left the work pending; with `evict_mb`, that
    many megabytes are written before every `every`-th decision, untimed (`evict`)."""
    latencies: list[int] = []
    pending = 0
    clock = time.perf_counter_ns
    scratch = bytearray(evict_mb << 20)
    for index, request in enumerate(requests):
        if evict_mb and index % every == 0:
            evict(scratch)
        if isinstance(request, PlacementGroupRequest):
            begin = clock()
            decision = cluster.create_placement_group(request)
            latencies.append(clock() - begin)
        else:
            begin = clock()
            decision = cluster.submit(request)
            latencies.append(clock() - begin)
        pending += isinstance(decision, Pending)
    return latencies, pending


def evict(scratch: bytearray) -> None:
    """Write one byte in every 64 (a cache line) of `scratch`: what the caches held of the cluster is pushed out
    when `scratch` is larger than they are, as the other processes of a busy machine push out a scheduler's."""
    scratch[::64] = bytes(len(range(0, len(scratch), 64)))


def run_case(workload: Workload, nodes: int, decisions: int, evict_mb: int = 0, every: int = 1) -> Figures:
    """Build the cluster, time the decisions, and return the figures of this case."""
    layout = Layout(nodes)
    strategies = [workload.strategy(labels["app"]) for labels in layout.app_labels] if workload.strategy else []
    events = build_events(workload, layout, strategies)
    started = time.perf_counter()
    cluster = Cluster.from_events(events, SEED)
    replay_seconds = time.perf_counter() - started
    placed_before = len(cluster.placements())
    expected = nodes * ACTORS_PER_NODE
    if placed_before != expected:
        raise RuntimeError(f"setup folded {placed_before} placed actors, expected {expected}")
    requests = workload.decisions(layout, decisions, strategies)
    folded = len(events)
    del events
    gc.collect()
    gc.freeze()  # the pre-filled cluster is long-lived: keep the collector from re-walking it on every cycle
    try:
        latencies, pending = _time_decisions(cluster, requests, evict_mb, every)
    finally:
        gc.unfreeze()
    if pending:
        progress(f"  warning: {pending} of {decisions} decisions were pending (the benchmark expects placements)")
    latencies.sort()
    total_ns = sum(latencies) or 1
    return Figures(
        workload=workload.name,
        nodes=nodes,
        placed_before=placed_before,
        decisions_per_s=round(len(latencies) * 1e9 / total_ns, 1),
        p50_us=round(percentile(latencies, 0.50) / 1000, 1),
        p99_us=round(percentile(latencies, 0.99) / 1000, 1),
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        replay_events_per_s=round(folded / replay_seconds, 1),
    )


def run_one(name: str, nodes: int, args: argparse.Namespace) -> Figures:
    """Run one case in this process."""
    if name == "vclusters":
        return vclusters.run_case(nodes, args.decisions, args.tenants, args.churn)
    return run_case(WORKLOADS[name], nodes, args.decisions, args.evict_mb, args.evict_every)


def run_in_subprocess(workload: str, nodes: int, args: argparse.Namespace) -> Figures | None:
    """Run one case in a fresh interpreter (so peak RSS is the case's own); None if it failed."""
    command = [sys.executable, "-m", "services.cli", "bench", "core", "-o", "json", "--decisions", str(args.decisions)]
    command += ["--tenants", str(args.tenants), "--churn", str(args.churn), "--one", f"{workload}:{nodes}"]
    command += ["--evict-mb", str(args.evict_mb), "--evict-every", str(args.evict_every)]
    finished = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    if finished.returncode != 0:
        progress(f"  {workload} at {nodes} nodes failed (exit status {finished.returncode})")
        return None
    return cast(Figures, json.loads(finished.stdout.strip().splitlines()[-1]))


COLUMNS = (
    ("workload", 20, "WORKLOAD"),
    ("nodes", 7, "NODES"),
    ("placed_before", 14, "PLACED_BEFORE"),
    ("decisions_per_s", 12, "DECISIONS/S"),
    ("p50_us", 9, "P50_US"),
    ("p99_us", 9, "P99_US"),
    ("peak_rss_mb", 12, "PEAK_RSS_MB"),
    ("replay_events_per_s", 12, "REPLAY_EV/S"),
)


def _row(figures: Figures) -> str:
    values: dict[str, object] = dict(figures)
    cells = []
    for key, width, _ in COLUMNS:
        value = values[key]
        text = (
            f"{value:,.0f}"
            if isinstance(value, float) and key in ("decisions_per_s", "replay_events_per_s")
            else (f"{value:,}" if isinstance(value, int) else str(value))
        )
        cells.append(text.ljust(width) if key == "workload" else text.rjust(width))
    return "  ".join(cells).rstrip()


def scaling_line(results: list[Figures], small: int, large: int) -> str | None:
    """Cost per decision at `large` nodes over `small` nodes, per workload ("x1.3"), when both ran."""
    rates = {(r["workload"], r["nodes"]): r["decisions_per_s"] for r in results}
    parts = [
        f"{name} x{rates[(name, small)] / rates[(name, large)]:.2f}"
        for name in WORKLOADS
        if (name, small) in rates and (name, large) in rates
    ]
    if not parts:
        return None
    return f"cost per decision at {large:,} vs {small:,} nodes: " + ", ".join(parts)


def _parse_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in _parse_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes {text!r}: expected comma-separated node counts") from None
    if not sizes or any(size < 10 for size in sizes):
        raise argparse.ArgumentTypeError(f"sizes {text!r}: each size must be at least 10 nodes")
    return sizes


def _workloads(text: str) -> list[str]:
    names = _parse_list(text)
    unknown = [name for name in names if name not in WORKLOADS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"workloads {text!r}: unknown {unknown}; choose from {', '.join(WORKLOADS)}")
    return names


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number >= 0")
    return value


MOST_EVICTED_MB = 4096
"""The most `--evict-mb` may ask for (it is held in memory for the whole run)."""


def _megabytes(text: str) -> int:
    value = _count(text)
    if value > MOST_EVICTED_MB:
        raise argparse.ArgumentTypeError(f"{text!r}: must be 0 to {MOST_EVICTED_MB:,} megabytes")
    return value


def _one(text: str) -> tuple[str, int]:
    name, _, size = text.partition(":")
    return _workloads(name)[0], _sizes(size)[0]


def add_parsers(commands: Subcommands) -> None:
    """`corral bench core`."""
    core = commands.add_parser(
        "core",
        help="decisions per second of the scheduling core (modelled on Kubernetes' scheduler_perf)",
        description=__doc__,
    )
    add_arguments(core)
    core.set_defaults(run=run, parser=core)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `corral bench core`."""
    add_output_argument(parser, ("table", "json"), json=True)
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=None,
        help="comma-separated node counts (default: 1000,5000,20000; 1000 for vclusters)",
    )
    parser.add_argument(
        "--workloads",
        type=_workloads,
        default=list(WORKLOADS),
        help=f"comma-separated workloads (default: all of {', '.join(WORKLOADS)})",
    )
    parser.add_argument(
        "--decisions",
        type=positive_int,
        default=2000,
        help="timed decisions per case (default: 2000; vclusters: that many inside clusters and as many at the root)",
    )
    parser.add_argument(
        "--tenants",
        type=positive_int,
        default=vclusters.DEFAULT_TENANTS,
        help=f"vclusters: tenant clusters created first (their minima ask 80%% of the free CPUs); half as many "
        f"more are requested after them, so some queue (default: {vclusters.DEFAULT_TENANTS})",
    )
    parser.add_argument(
        "--churn",
        type=_count,
        default=vclusters.DEFAULT_CHURN,
        help=f"vclusters: rounds of destroying an admitted cluster and requesting it again "
        f"(default: {vclusters.DEFAULT_CHURN})",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run every case in this process (faster start; peak RSS is then the process's, not the case's)",
    )
    parser.add_argument(
        "--evict-mb",
        type=_megabytes,
        default=0,
        metavar="MB",
        help="write this many megabytes before every --evict-every decisions, untimed, so the decisions after it find "
        "the cluster out of the caches, as a scheduler sharing a busy machine does (not the vclusters workload; "
        "default: 0, warm caches)",
    )
    parser.add_argument(
        "--evict-every",
        type=positive_int,
        default=20,
        metavar="N",
        help="decisions between two evictions (default: 20)",
    )
    parser.add_argument("--one", type=_one, help=argparse.SUPPRESS)


def plan_cases(workloads: list[str], sizes: list[int] | None) -> list[tuple[str, int]]:
    """The (workload, nodes) cases, size by size (in the given order; without `sizes`, each workload's defaults
    in ascending order)."""
    sizes_of = {name: sizes or list(DEFAULT_SIZES_OF.get(name, DEFAULT_SIZES)) for name in workloads}
    every_size = list(dict.fromkeys(sizes)) if sizes else sorted({n for chosen in sizes_of.values() for n in chosen})
    return [(name, size) for size in every_size for name in workloads if size in sizes_of[name]]


def run(args: argparse.Namespace) -> int:
    """Run the selected cases and print their figures."""
    if args.one is not None:
        name, nodes = args.one
        print(json.dumps(run_one(name, nodes, args)), flush=True)
        return 0
    cases = plan_cases(args.workloads, args.sizes)
    if args.output != "json":
        print("corral bench core: 10 placed actors per node before timing; one line per case as it finishes")
        print("  ".join(title.ljust(w) if key == "workload" else title.rjust(w) for key, w, title in COLUMNS))
    results: list[Figures] = []
    failed = 0
    for number, (name, size) in enumerate(cases, 1):
        progress(f"[{number}/{len(cases)}] {name} at {size:,} nodes: {WORKLOADS[name].summary}")
        started = time.perf_counter()
        if args.in_process:
            result: Figures | None = run_one(name, size, args)
        else:
            result = run_in_subprocess(name, size, args)
        progress(f"  ({time.perf_counter() - started:.1f} s)")
        if result is None:
            failed += 1
            continue
        results.append(result)
        print(json.dumps(result) if args.output == "json" else _row(result), flush=True)
        if name == "vclusters" and args.output != "json":
            print("\n".join(vclusters.summary_lines(cast(vclusters.VClusterFigures, result))), flush=True)
    line = scaling_line(results, 5000, 20000)
    if line and args.output != "json":
        print(line)
    return 1 if failed else 0
