"""The command line of `python -m loadtest`: options, the run, and the report as a table or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from loadtest.harness import Config, run
from loadtest.report import format_report, to_json
from schemas.commands import MAX_BATCH
from services.cli.args import duration, non_negative_int, positive_int

any_seconds = duration(zero=True)


def batch_size(text: str) -> int:
    """An argparse type: requests per batch message, a whole number from 1 to `MAX_BATCH`."""
    number = positive_int(text)
    if number > MAX_BATCH:
        raise argparse.ArgumentTypeError(
            f"{text!r} must be at most {MAX_BATCH:,} (the most requests one corral.req.batch message carries)"
        )
    return number


def build_parser() -> argparse.ArgumentParser:
    """The options of `python -m loadtest`."""
    parser = argparse.ArgumentParser(
        prog="python -m loadtest",
        description=(
            "Load test of a Corral mesh: register simulated nodes, drive users sending scheduling requests, "
            "measure durable placements/s and submit-to-decision latency, then p99 at half that throughput, then "
            "schedule inside virtual clusters (in parts that alternate with the root's: the inside ratio compares "
            "the two), compare with the bus floor (the same messages answered by a no-op decider); and grow and "
            "shrink a cluster with the autoscaler. Each phase reports each process's "
            "CPU microseconds per durable placement, the serial path's (the scheduler), the placements/s it "
            "allows, and the serial path over the load generator's own CPU (on a shared machine both move with how "
            "busy it is: docs/throughput.md). Figures are printed, never judged by the exit status."
        ),
    )
    parser.add_argument("--nodes", type=positive_int, default=1000, help="simulated nodes (default: 1000)")
    parser.add_argument("--users", type=positive_int, default=50, help="simulated users (default: 50)")
    parser.add_argument(
        "--tenants",
        type=non_negative_int,
        default=200,
        help="virtual clusters for the tenants phase: admitted over the bus, users inside them, a queue drained "
        "by destroying them (default: 200; 0 skips the phase)",
    )
    parser.add_argument("--duration", type=any_seconds, default=10.0, help="seconds of the Corral phase (default: 10)")
    parser.add_argument(
        "--rate",
        type=any_seconds,
        default=0.0,
        help="requests/s of an open loop instead of closed-loop users (default: 0 = as fast as possible)",
    )
    parser.add_argument(
        "--floor-duration", type=any_seconds, default=10.0, help="seconds of the bus-floor phase (0 skips it)"
    )
    parser.add_argument(
        "--floor-processes",
        type=positive_int,
        default=Config.floor_processes,
        help="generator and decider processes of the bus floor, each (default: a quarter of the cores, at least 1)",
    )
    parser.add_argument(
        "--fixed-duration",
        type=any_seconds,
        default=10.0,
        help="seconds at half the measured throughput, for p99 (0 skips it; skipped with --rate)",
    )
    parser.add_argument(
        "--autoscaler-duration",
        type=any_seconds,
        default=Config.autoscaler_duration,
        help="seconds of the autoscaler phase's users, on a mesh of its own with the autoscaler (local provider), "
        "also with --nats-url; its nodes are launched for them and scaled down after (default: 8; 0 skips it)",
    )
    parser.add_argument("--warmup", type=any_seconds, default=1.0, help="unmeasured seconds before each phase")
    parser.add_argument("--hold", type=positive_int, default=20, help="actors a user holds before removing its oldest")
    parser.add_argument(
        "--batch",
        type=batch_size,
        default=1,
        metavar="K",
        help=f"requests per message, 1 to {MAX_BATCH:,}: above 1, each user sends its submits K at a time in one "
        "corral.req.batch message and waits for its one BatchReply, and removes K at a time alike (the floor sends "
        "the same batches); every request counts as one in every figure, and each request's submit-to-placed "
        "latency is its batch's round trip; with --rate R, R/K batches per second (default: 1, each request alone)",
    )
    parser.add_argument("--connections", type=positive_int, default=4, help="client connections the users share")
    parser.add_argument("--timeout", type=any_seconds, default=10.0, help="seconds to wait for one reply")
    parser.add_argument("--seed", type=int, default=0, help="seed of the workload mix")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--nats-url", help="load an already running mesh (default: start an embedded one in a temporary folder)"
    )
    parser.add_argument("--data-dir", type=Path, help="keep the embedded mesh's data and logs in this folder")
    parser.add_argument(
        "--replicas",
        type=positive_int,
        default=1,
        help="nats-servers of the embedded mesh, clustered on loopback, every stream kept on all of them "
        "(CORRAL_REPLICAS; at most 5; default: 1)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="an earlier run's --json report at 1 replica: with --replicas, judge whether Corral keeps at least the "
        "share of its 1-replica rate that the bus floor keeps of its own",
    )
    return parser


def config_of(args: argparse.Namespace) -> Config:
    """The run's configuration from parsed options."""
    return Config(
        nodes=args.nodes,
        users=args.users,
        duration=args.duration,
        floor_duration=args.floor_duration,
        fixed_duration=args.fixed_duration,
        rate=args.rate,
        warmup=args.warmup,
        hold=args.hold,
        connections=args.connections,
        timeout=args.timeout or 10.0,
        seed=args.seed,
        quiet=args.quiet,
        tenants=args.tenants,
        floor_processes=args.floor_processes,
        autoscaler_duration=args.autoscaler_duration,
        replicas=args.replicas,
        baseline_share=json.loads(args.baseline.read_text())["floor_share"] if args.baseline else None,
        batch=args.batch,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the load test and print its report; 0 whether or not the targets were met, 1 if the run failed."""
    args = build_parser().parse_args(argv)
    if args.replicas > 5:
        print("python -m loadtest: --replicas must be at most 5 (JetStream's most)", file=sys.stderr)
        return 2
    if args.replicas > 1 and args.nats_url:
        print("python -m loadtest: --replicas starts its own servers: give it without --nats-url", file=sys.stderr)
        return 2
    if args.duration <= 0:
        print("python -m loadtest: --duration must be above 0", file=sys.stderr)
        return 2
    try:
        report = run(config_of(args), args.nats_url, args.data_dir)
    except KeyboardInterrupt:
        print("python -m loadtest: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # the run itself failed (no mesh, no services): say why, no figures
        print(f"python -m loadtest: the run failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(to_json(report) if args.json else format_report(report), flush=True)
    return 0
