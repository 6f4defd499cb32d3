"""How many instructions the leading scheduler runs per request: the serial path in a figure the machine cannot move.

`python -m loadtest.leader_instructions` starts a mesh without its scheduler, runs the scheduler under valgrind's
callgrind with counting off, drives it with `python -m loadtest` (the closed-loop Corral phase only), and counts
what the scheduler executes over `--seconds` in the middle of the phase: every instruction of its process (the
core, the runtime, nats-py, asyncio, the interpreter), divided by the requests the scheduler acked meanwhile (the
requests consumer's ack floor, read before and after, times the requests a message carries). With
`--decision-workers N` the mesh runs N decision workers and the scheduler counted is their applier (the serial step
then); the requests are those the workers acked.

CPU microseconds per request move with how busy a shared machine is (docs/throughput.md: the same code measured 27
to 66 us); instructions do not, so two commits compare on one figure. Under callgrind the scheduler runs some fifty
times slower, so its parts are fuller than at full speed (a fetch finds more waiting): the figure leaves out none of
the per-request work and slightly less of the per-part work than a live run spreads over its requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nats

from loadtest.cli import batch_size
from loadtest.leader_options import FOLLOWERS, add_decision_workers, add_load_size, check_decision_workers
from schemas import subjects as s
from services import CORE_BUILD
from services.cli.args import duration
from services.local.mesh import DECIDER, start_mesh

SCHEDULER_SETTINGS = {"CORRAL_LEASE_TTL": "60", "CORRAL_REQUEST_ACK_WAIT": "300", "CORRAL_LOG_LEVEL": "INFO"}
"""The scheduler's settings under callgrind: a lease and an ack wait that its slowness cannot outlast, and the log
level at which it says it leads (`LEADING`), whatever the environment sets."""
VALGRIND_TOOLS = ("valgrind", "callgrind_control")
"""The commands the count needs, from valgrind's package."""
LEADING = "leads from sequence"
"""What the scheduler logs once it leads (`app.Leader.take_over`)."""
TOTALS = re.compile(rb"^totals:\s*(\d+)", re.MULTILINE)


def callgrind_total(outputs: list[bytes]) -> int:
    """The instructions counted in all by callgrind's output files (the dump taken after counting, and the one it
    writes at exit): the sum of their `totals:` lines."""
    totals = [int(found) for out in outputs for found in TOTALS.findall(out)]
    if not totals:
        raise ValueError("no totals line in the callgrind output")
    return sum(totals)


def per_request(instructions: int, acked_before: int, acked_after: int, batch: int) -> dict[str, Any]:
    """The figures of a window in which the scheduler ran `instructions` while the ack floor of the requests
    consumer moved from `acked_before` to `acked_after` (messages of `batch` requests each)."""
    requests = max(0, acked_after - acked_before) * batch  # a floor that went back (the consumer made again): none
    return {
        "instructions": instructions,
        "requests": requests,
        "instructions_per_request": round(instructions / requests) if requests > 0 else None,
    }


async def _ack_floor(nats_url: str) -> int:
    """The stream sequence up to which the scheduler has acked every request message."""
    connection = await nats.connect(nats_url)
    try:
        info = await connection.jetstream().consumer_info(s.REQUESTS_STREAM, s.REQUESTS_CONSUMER)
        return info.ack_floor.stream_seq if info.ack_floor else 0
    finally:
        await connection.close()


def _wait_for_line(path: Path, text: str, process: subprocess.Popen[bytes], name: str, timeout: float) -> None:
    """Wait until `text` shows in the file `path` while `process` (called `name`) runs."""
    deadline = time.monotonic() + timeout
    while text not in path.read_text(errors="replace"):
        if process.poll() is not None:
            raise RuntimeError(f"{name} ended before {text!r} showed in {path}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{text!r} did not show in {path} within {timeout:.0f} s")
        time.sleep(0.5)


def measure(nodes: int, users: int, batch: int, settle: float, seconds: float, workers: int = 0) -> dict[str, Any]:
    """Count the scheduler's instructions over `seconds`, `settle` seconds into the load test's Corral phase (the
    applier's, with `workers` decision workers)."""
    with tempfile.TemporaryDirectory(prefix="corral-leader-instructions-") as folder:
        mesh = start_mesh(Path(folder) / "mesh", services=FOLLOWERS)
        out, log, progress = (Path(folder) / name for name in ("callgrind.out", "scheduler.log", "load.log"))
        try:
            for index in range(workers):
                mesh.start_service(DECIDER, instance=f"{DECIDER}-{index + 1}")
            env = {
                **os.environ,
                **mesh.env,
                **SCHEDULER_SETTINGS,
                "CORRAL_INSTANCE": "scheduler",
                "PYTHONHASHSEED": "0",
            }
            env["CORRAL_DECISION_WORKERS"] = str(workers)
            with log.open("wb") as sink:
                scheduler = subprocess.Popen(
                    ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                     sys.executable, "-m", "services.scheduler"],
                    env=env, stdout=sink, stderr=subprocess.STDOUT,
                )  # fmt: skip
            try:
                _wait_for_line(log, LEADING, scheduler, "the scheduler", timeout=300)
                with progress.open("wb") as sink:
                    load = subprocess.Popen(
                        [sys.executable, "-m", "loadtest", "--nats-url", mesh.nats_url, "--nodes", str(nodes),
                         "--users", str(users), "--batch", str(batch), "--duration", str(settle + seconds + 10),
                         "--timeout", "300", "--tenants", "0", "--floor-duration", "0", "--fixed-duration", "0",
                         "--autoscaler-duration", "0", "--json"],
                        stdout=subprocess.PIPE, stderr=sink,
                    )  # fmt: skip
                _wait_for_line(progress, "warm-up", load, "the load test", timeout=300)
                time.sleep(settle)
                before = asyncio.run(_ack_floor(mesh.nats_url))
                subprocess.run(["callgrind_control", "-i", "on", str(scheduler.pid)], check=True, capture_output=True)
                time.sleep(seconds)
                for command in ("-i", "off"), ("-d",):  # a dump now: what counted is written before the exit
                    subprocess.run(["callgrind_control", *command, str(scheduler.pid)], check=True, capture_output=True)
                after = asyncio.run(_ack_floor(mesh.nats_url))
                load.communicate()
            finally:
                scheduler.terminate()
                scheduler.wait(timeout=120)
            instructions = callgrind_total([dump.read_bytes() for dump in Path(folder).glob(f"{out.name}*")])
        finally:
            mesh.close()
    figures = per_request(instructions, before, after, batch)
    return {
        "nodes": nodes,
        "users": users,
        "batch": batch,
        "decision_workers": workers,
        "core": CORE_BUILD,
        "seconds": seconds,
        **figures,
    }


def text(figures: dict[str, Any]) -> str:
    """The figures as one line."""
    each, workers = figures["instructions_per_request"], figures["decision_workers"]
    who = f"applier of {workers} decision worker{'s' if workers > 1 else ''}" if workers else "scheduler"
    return (
        f"leading {who} (the core's {figures['core']} build), {figures['nodes']:,} nodes, {figures['users']} "
        f"users, batches of {figures['batch']}: {figures['instructions']:,} instructions over {figures['requests']:,} "
        f"requests in {figures['seconds']:g} s counted: "
        + (f"{each:,} instructions per request" if each is not None else "no request acked while counting")
    )


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, measure, print."""
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.leader_instructions",
        description="The instructions the leading scheduler (the serial path) runs per request, counted by "
        "valgrind's callgrind in the middle of the load test's Corral phase: a figure that, unlike CPU time, does "
        "not move with how busy the machine is. Needs valgrind (Debian's package); takes about two minutes.",
    )
    add_load_size(parser, users=10)
    parser.add_argument(
        "--batch", type=batch_size, default=20, metavar="K", help="requests per message of the load (default: 20)"
    )
    parser.add_argument(
        "--settle", type=duration(), default=10.0, help="seconds into the phase before counting (default: 10)"
    )
    parser.add_argument("--seconds", type=duration(), default=20.0, help="seconds counted (default: 20)")
    add_decision_workers(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the line")
    args = parser.parse_args(argv)
    check_decision_workers(parser, args.decision_workers)
    missing = [tool for tool in VALGRIND_TOOLS if shutil.which(tool) is None]
    if missing:
        parser.error(f"{' and '.join(missing)} not found: install valgrind (Debian: apt-get install valgrind)")
    figures = measure(args.nodes, args.users, args.batch, args.settle, args.seconds, args.decision_workers)
    print(json.dumps(figures) if args.json else text(figures))
    return 0 if figures["instructions_per_request"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
