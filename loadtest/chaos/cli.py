"""`python -m loadtest.chaos`: mixed load on an embedded mesh while its pieces are killed and restarted at random;
then the figures: requests sent, answered, lost, decided twice, nodes over-full, the longest unavailability, and
whether each service's live digest equals a full replay of the log.

The mesh runs the four services and a standby scheduler; a supervisor restarts a service that exits on its own
(as a deployment's restart policy would) and counts it. Figures are printed, never judged by the exit status.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.chaos.figures import Request, fold_log, in_log, longest_gap, lost
from loadtest.chaos.load import Load
from loadtest.chaos.monkey import STANDBY, VICTIMS, Monkey
from loadtest.digests import check_digests
from services.cli.args import duration, non_negative_int, positive_int
from services.client import Client
from services.local.mesh import Mesh, start_mesh
from services.runtime.settings import Settings

MESH_SETTINGS = {"CORRAL_REQUEST_ACK_WAIT": "3", "CORRAL_LOG_LEVEL": "INFO"}
"""A request a killed scheduler held is delivered again after 3 s (10 s by default)."""
SHOWN = 5
"""Ids listed per figure (the JSON has them all)."""
QUOTED = re.compile(r"'[^']*'")
"""A quoted value in a refusal (an id): taken out, so that refusals for the same cause count together."""


@dataclass(frozen=True)
class ChaosConfig:
    """How long, how hard, and how much load."""

    seconds: float
    seed: int = 0
    nodes: int = 12
    users: int = 6
    kill_every: float = 5.0
    nats_outage_max: float = 8.0
    settle: float = 30.0
    quiet: bool = False


def progress(config: ChaosConfig, text: str) -> None:
    """A progress line on stderr (the figures go to stdout)."""
    if not config.quiet:
        print(f"chaos: {text}", file=sys.stderr, flush=True)


async def wait_ready(mesh: Mesh, timeout: float) -> str:
    """Wait until every service answers; "" when they all do within `timeout` seconds, else what failed."""
    try:
        async with Client(mesh.nats_url, timeout=5.0) as client:
            await client.wait_ready(timeout=timeout)
    except Exception as error:  # not ready in time: the figures say so
        return f"{type(error).__name__}: {error}"
    return ""


async def chaos(config: ChaosConfig, mesh: Mesh) -> dict[str, Any]:
    """Load, kill and restart for `config.seconds`; settle; read the log and compute the figures."""
    unready = await wait_ready(mesh, 60.0)
    if unready:
        raise RuntimeError(f"the mesh did not start: {unready}")
    load = Load(mesh.nats_url, nodes=config.nodes, users=config.users, seed=config.seed)
    monkey = Monkey(mesh, config.seed, config.kill_every, config.nats_outage_max)
    try:
        await load.connect()
        progress(config, f"{config.nodes} nodes up; {config.users} users and the monkey for {config.seconds:g} s")
        supervisor = asyncio.create_task(monkey.supervise())
        try:
            began = time.monotonic()
            killing = asyncio.create_task(monkey.kill_until(began + config.seconds))
            start, end = await load.run(config.seconds, config.settle)
            await killing
            progress(config, f"load stopped; settling ({time.monotonic() - end:.0f} s of retries so far)")
            unready = await wait_ready(mesh, config.settle)
            return await figures(config, mesh, load, monkey, (start, end), unready)
        finally:
            supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await supervisor
    finally:
        await load.close()


async def figures(
    config: ChaosConfig, mesh: Mesh, load: Load, monkey: Monkey, window: tuple[float, float], unready: str
) -> dict[str, Any]:
    """Read the whole log, fold it, and compare every service's live digest with a replay."""
    bus = load.connections[0].bus
    events = await bus.read_to(await bus.last_sequence())
    fold = fold_log(events)
    requests = list(load.ledger.requests.values())
    missing = lost(requests, fold)
    gap, gap_at = longest_gap(load.ledger.answers, *window)
    progress(config, f"{len(events):,} events read; comparing live digests with replays")
    digests = await check_digests(Settings.from_env(mesh.env), bus)
    return {
        "seconds": config.seconds,
        "seed": config.seed,
        "nodes": config.nodes,
        "users": config.users,
        "kills": dict(sorted(monkey.kills.items())),
        "exits": monkey.exits,
        "not_ready_after_settle": unready,
        "events": len(events),
        "fenced_events": fold.fenced,
        "requests": _request_rows(requests, missing),
        "refusals": _refusals(requests),
        "lost": [f"{request.kind} {request.key}" for request in missing],
        "unanswered": [
            f"{request.kind} {request.key} ({'decided' if in_log(request, fold) else 'not decided'} in the log; "
            f"{request.attempts} sends)"
            for request in requests
            if request.answered_at is None
        ],
        "decided_twice": fold.doubled,
        "over_full": [
            {"node": o.node_id, "resource": o.resource, "used": o.used, "capacity": o.capacity, "event": o.event_index}
            for o in fold.overfull
        ],
        "longest_unavailability_s": round(gap, 2),
        "longest_wait_s": round(max((r.answered_at - r.sent_at for r in requests if r.answered_at), default=0.0), 2),
        "longest_unavailability_at_s": round(gap_at - window[0], 2),
        "digests": {
            check.service: {"equal": check.equal, "sequence": check.sequence, "detail": check.detail}
            for check in digests
        },
    }


def _request_rows(requests: Sequence[Request], missing: Sequence[Request]) -> dict[str, dict[str, int]]:
    rows: dict[str, Counter[str]] = {}
    for request in requests:
        row = rows.setdefault(request.kind, Counter())
        row["sent"] += 1
        row["attempts"] += request.attempts
        row["answered"] += request.answered_at is not None
        row["unanswered"] += request.answered_at is None
        row["rejected"] += request.rejected
    for request in missing:
        rows[request.kind]["lost"] += 1
    total: Counter[str] = Counter()
    for row in rows.values():
        total.update(row)
    keys = ("sent", "attempts", "answered", "rejected", "unanswered", "lost")
    return {kind: {key: row[key] for key in keys} for kind, row in [*sorted(rows.items()), ("total", total)]}


def _refusals(requests: Sequence[Request]) -> dict[str, dict[str, int]]:
    """Per kind, how often each reason of refusal was given (the commonest first, at most `SHOWN`)."""
    reasons: dict[str, Counter[str]] = {}
    for request in requests:
        if request.rejected:
            reasons.setdefault(request.kind, Counter())[QUOTED.sub("'<id>'", request.reason)[:120]] += 1
    return {kind: dict(counter.most_common(SHOWN)) for kind, counter in sorted(reasons.items())}


def targets_met(report: dict[str, Any]) -> bool:
    """Zero lost, zero decided twice, zero over-full, and every live digest equal to a replay."""
    equal = all(check["equal"] for check in report["digests"].values())
    return not report["lost"] and not report["decided_twice"] and not report["over_full"] and equal


def _listed(items: Sequence[Any]) -> str:
    shown = ", ".join(str(item) for item in items[:SHOWN])
    return f"{len(items)}" + (f" ({shown}{', ...' if len(items) > SHOWN else ''})" if items else "")


def format_report(report: dict[str, Any]) -> str:
    """The figures as a readable table."""
    lines = [
        f"Chaos run: {report['seconds']:g} s, seed {report['seed']}, {report['nodes']} nodes, {report['users']} users",
        "kills: " + (", ".join(f"{victim} x{count}" for victim, count in report["kills"].items()) or "none"),
        "exited on their own (codes): "
        + (", ".join(f"{key} {codes}" for key, codes in sorted(report["exits"].items())) or "none"),
        "",
        f"{'requests':<12}{'sent':>8}{'attempts':>10}{'answered':>10}{'rejected':>10}{'unanswered':>12}{'lost':>7}",
    ]
    for kind, row in report["requests"].items():
        lines.append(
            f"{kind:<12}{row['sent']:>8}{row['attempts']:>10}{row['answered']:>10}"
            f"{row['rejected']:>10}"
            f"{row['unanswered']:>12}{row['lost']:>7}"
        )
    for kind, reasons in report["refusals"].items():
        lines += [f"  {kind} refused x{count}: {reason}" for reason, count in reasons.items()]
    over_full = [f"{o['node']} {o['resource']} {o['used']:g}/{o['capacity']:g}" for o in report["over_full"]]
    lines += [
        "",
        f"unanswered:             {_listed(report['unanswered'])}",
        f"lost:                   {_listed(report['lost'])}",
        f"decided twice:          {_listed(report['decided_twice'])}",
        f"nodes over-full:        {_listed(over_full)}",
        f"longest unavailability: {report['longest_unavailability_s']:.2f} s "
        f"(from {report['longest_unavailability_at_s']:.1f} s into the run)",
        f"longest wait:           {report['longest_wait_s']:.2f} s (one request, from its first send to its answer)",
        f"events in the log:      {report['events']:,} ({report['fenced_events']:,} of a deposed scheduler, ignored)",
        f"ready after settling:   {('NO: ' + unready) if (unready := report['not_ready_after_settle']) else 'yes'}",
        "live digest == replay:  "
        + ", ".join(
            f"{service} {'yes' if check['equal'] else 'NO (' + check['detail'] + ')'}"
            for service, check in report["digests"].items()
        ),
        "",
        f"targets (0 lost, 0 doubled, 0 over-full, digests equal): {'met' if targets_met(report) else 'NOT met'}",
    ]
    return "\n".join(lines)


def run(config: ChaosConfig, data_dir: Path | None = None) -> dict[str, Any]:
    """Start a mesh (in `data_dir`, else a temporary folder) with a standby scheduler, run the chaos, stop it."""
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="corral-chaos-")))
        progress(config, f"starting a mesh in {data_dir}")
        mesh = start_mesh(data_dir, settings=MESH_SETTINGS)
        stack.callback(mesh.close)
        mesh.start_service("scheduler", STANDBY)
        return asyncio.run(chaos(config, mesh))
    raise AssertionError("unreachable")


def build_parser() -> argparse.ArgumentParser:
    """The options of `python -m loadtest.chaos`."""
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.chaos",
        description=(
            "Mixed load on an embedded mesh (nodes with heartbeats, submissions with selectors, tolerations and "
            "affinity, removals, taints, node churn, virtual clusters) while the services, a standby scheduler, "
            f"nats-server and redis-server ({', '.join(VICTIMS)}) are killed with SIGKILL and restarted at random. "
            "Unanswered requests are sent again with the same id. Then: requests answered and lost, actors decided "
            "twice, nodes over-full, the longest time nothing was answered, and whether each live digest equals "
            "a replay. Figures are printed, never judged by the exit status."
        ),
    )
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--minutes", type=duration(), help="how long the load and the kills last (default: 10)")
    length.add_argument("--seconds", type=duration(), help="the same, in seconds")
    parser.add_argument("--seed", type=int, default=0, help="seed of the load and of the kills (default: 0)")
    parser.add_argument("--nodes", type=positive_int, default=12, help="nodes registered at the start (default: 12)")
    parser.add_argument("--users", type=positive_int, default=6, help="concurrent simulated users (default: 6)")
    parser.add_argument(
        "--kill-every", type=duration(), default=5.0, help="mean seconds between two kills (default: 5)"
    )
    parser.add_argument(
        "--nats-outage-max",
        type=duration(),
        default=8.0,
        help="longest nats-server outage in seconds, drawn at random up to it (default: 8)",
    )
    parser.add_argument(
        "--settle",
        type=non_negative_int,
        default=30,
        help="seconds after the load during which unanswered requests are still retried (default: 30)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--data-dir", type=Path, help="keep the mesh's data and logs in this folder")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run and print the figures; 0 whether or not the targets were met, 1 if the run itself failed."""
    args = build_parser().parse_args(argv)
    seconds = args.seconds if args.seconds is not None else (args.minutes if args.minutes is not None else 10) * 60
    config = ChaosConfig(
        seconds=seconds,
        seed=args.seed,
        nodes=args.nodes,
        users=args.users,
        kill_every=args.kill_every,
        nats_outage_max=args.nats_outage_max,
        settle=float(args.settle),
        quiet=args.quiet,
    )
    try:
        report = run(config, args.data_dir)
    except KeyboardInterrupt:
        print("python -m loadtest.chaos: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # the run itself failed (no mesh, no services): say why, no figures
        print(f"python -m loadtest.chaos: the run failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    report["targets_met"] = targets_met(report)
    print(json.dumps(report, indent=2) if args.json else format_report(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
