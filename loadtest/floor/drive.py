"""The bus floor driven from several processes, so that it measures the bus and not one Python process.

Each generator process (`python -m loadtest.floor.drive`) runs its share of the users against the floor's streams
from a wall-clock moment the parent chose, so every process measures the same window, then prints its recorder as
one JSON line; the parent merges them into one recorder, as if one process had sent everything.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from loadtest.stats import Recorder, Tally
from loadtest.transport import Connection, FloorTarget, Replies
from loadtest.users import Drive, Outcome, closed_loop, open_loop
from services.client import Client
from services.runtime import collector

START_DELAY = 2.0
"""Seconds between spawning the generators and their common start: enough for each to import and connect."""


def shares(drive: Drive, processes: int) -> list[Drive]:
    """`drive` split over `processes`: the users (and an open loop's rate) divided, each share with its own ids."""
    users = [drive.users // processes + (index < drive.users % processes) for index in range(processes)]
    return [
        dataclasses.replace(
            drive, tag=f"{drive.tag}p{index}", users=count, seed=drive.seed * 1000 + index, rate=drive.rate / processes
        )
        for index, count in enumerate(users)
        if count
    ]


def dump(recorder: Recorder, outcome: Outcome) -> dict[str, Any]:
    """What a generator hands back: its tallies, placed latencies and open-loop health (no actor ids)."""
    return {
        "tallies": {name: dataclasses.asdict(tally) for name, tally in recorder.tallies.items()},
        "placed_latencies_ms": recorder.placed_latencies_ms,
        "outside": recorder.outside,
        "outcome": dataclasses.asdict(dataclasses.replace(outcome, held=[])),
    }


def merged(dumps: Sequence[dict[str, Any]], seconds: float) -> tuple[Recorder, Outcome]:
    """One recorder over a window of `seconds` and one outcome from every generator's dump."""
    recorder, outcome = Recorder(0.0, seconds), Outcome()
    for found in dumps:
        tallies = {name: Tally(**tally) for name, tally in found["tallies"].items()}
        recorder.absorb(Recorder(0.0, seconds, tallies, found["placed_latencies_ms"], found["outside"]))
        outcome.absorb(Outcome(**found["outcome"]))
    return recorder, outcome


async def spawn(nats_url: str, drive: Drive, start_at: float, timeout: float, connections: int) -> Any:
    """Start one generator process (its stdout piped)."""
    return await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "loadtest.floor.drive", "--nats-url", nats_url, "--drive"),
        *(json.dumps(dataclasses.asdict(drive)), "--start-at", repr(start_at)),
        *("--timeout", repr(timeout), "--connections", str(connections)),
        stdout=asyncio.subprocess.PIPE,
    )


async def finished(process: Any) -> dict[str, Any]:
    """A generator's dump once it exits; RuntimeError when it failed."""
    out, _ = await process.communicate()
    if process.returncode != 0 or not out:
        raise RuntimeError(f"a floor generator exited with status {process.returncode}")
    dumped: dict[str, Any] = json.loads(out.splitlines()[-1])
    return dumped


async def generate(nats_url: str, drive: Drive, start_at: float, timeout: float, connections: int) -> dict[str, Any]:
    """In a generator process: connect, wait for `start_at` (wall clock), drive, and return the dump."""
    clients = [Client(nats_url, name=f"loadtest-floor-{drive.tag}-{i}", timeout=timeout) for i in range(connections)]
    try:
        conns = []
        for client in clients:
            await client.connect()
            conns.append(Connection(client, Replies(client)))
            await conns[-1].replies.start()
        await asyncio.sleep(max(0.0, start_at - time.time()))
        target = FloorTarget(timeout)
        with collector.paused(collect_after=False):  # as in the parent: no pauses of its own in the window
            if drive.rate > 0:
                recorder, outcome = await open_loop(target, conns, drive, drain_timeout=timeout + 1)
            else:
                recorder, outcome = await closed_loop(target, conns, drive)
        return dump(recorder, outcome)
    finally:
        for client in clients:
            await client.close()


def main(argv: list[str] | None = None) -> int:
    """One generator: `python -m loadtest.floor.drive --nats-url URL --drive JSON --start-at EPOCH`."""
    parser = argparse.ArgumentParser(prog="python -m loadtest.floor.drive", description=__doc__)
    parser.add_argument("--nats-url", required=True)
    parser.add_argument("--drive", required=True, help="the Drive of this process, as JSON")
    parser.add_argument("--start-at", type=float, required=True, help="when to start (seconds since the epoch)")
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=2)
    args = parser.parse_args(argv)
    drive = Drive(**json.loads(args.drive))
    print(json.dumps(asyncio.run(generate(args.nats_url, drive, args.start_at, args.timeout, args.connections))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
