"""`python -m loadtest.replay`: how fast a service folds the log at start-up, and how soon it serves after a restart.

The figures come from the real start-up path of a service (`services.runtime.service.service_shell`: connect,
declare the streams, load the snapshot from Redis, replay the log's tail through `LogFollower`, serve) around a
`SchedulerView`, against a nats-server and a redis-server started in a temporary folder. Figures are printed,
never judged by the exit status.

The log is made by the scheduling core itself (`loadtest.replay.log` says how) and cut at exactly `--events`
events; the stream holds nothing else, so event k has sequence k.

Phases: generate, append (pipelined, as `Bus.append` does), a cold start on an empty Redis (full replay), the
log read without folding (the bus floor of a replay), decode and fold without I/O, a snapshot dumped at
`--events - --tail` and saved to Redis, then a cold start from that snapshot plus the tail. A start is "serving"
when a `DigestQuery` sent over NATS from another connection is answered; its digest must equal the fold's, and a
start whose view differs, or that logged errors (an event it could not apply), meets no requirement.

The pieces: `log` (generation), `starts` and `measure` (measurement), `verdict`
(the requirements), `report` (the text), this module (the command line).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from loadtest.replay.figures import ReplayConfig
from loadtest.replay.measure import run
from loadtest.replay.report import format_report
from services.cli.args import non_negative_int, positive_int


def build_parser() -> argparse.ArgumentParser:
    """The options of `python -m loadtest.replay`."""
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.replay",
        description=(
            "Start-up replay benchmark: write an event log made by the scheduling core to a local nats-server, "
            "then time a scheduler view's cold start replaying the whole log, the fold alone, and a restart "
            "from a Redis snapshot plus the log's tail. Figures are printed, never judged by the exit status."
        ),
    )
    parser.add_argument("--events", type=positive_int, default=1_000_000, help="events in the log (default: 1000000)")
    parser.add_argument("--nodes", type=positive_int, default=1000, help="nodes registered first (default: 1000)")
    parser.add_argument("--live", type=positive_int, default=10_000, help="actors running at once (default: 10000)")
    parser.add_argument(
        "--tail",
        type=non_negative_int,
        default=ReplayConfig.tail,
        help=f"events after the snapshot the restart loads (default: {ReplayConfig.tail}, CORRAL_SNAPSHOT_EVERY's)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the core that writes the log")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the text")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--data-dir", type=Path, help="keep the servers' data and logs in this folder")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its figures; 0 whether or not the targets were met, 1 if the run failed."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.tail >= args.events:
        parser.error(f"--tail {args.tail} must be below --events {args.events}")
    config = ReplayConfig(
        events=args.events, nodes=args.nodes, live=args.live, tail=args.tail, seed=args.seed, quiet=args.quiet
    )
    try:
        report = run(config, args.data_dir)
    except KeyboardInterrupt:
        print("python -m loadtest.replay: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # the run itself failed (no servers, a bad log): say why, no figures
        print(f"python -m loadtest.replay: the run failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(report) if args.json else format_report(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
