"""Where the leading scheduler's CPU goes, per request, measured without a profiler.

`python -m loadtest.leader_steps` starts a mesh without its scheduler, runs the scheduler in this process with
`time.process_time` read around its steps, drives it with `python -m loadtest` (the closed-loop Corral phase only)
and prints the CPU microseconds per request (a submit or a removal) of each step: the core's decision, recording
its events for the writer, decoding the request and the metrics, the reply and the ack, nats-py's reading of every
message received, building the appended messages, folding what the log delivers (our own batches skipped, other
services' events folded and reacted to), and the rest (fetching, publishing and the acks, the election check, the
lease, asyncio). The window runs from the first request decided to the last. cProfile inflates Python calls against
C several times, so its shares mislead for this split (docs/throughput.md); two clock reads around a step cost about
a microsecond.

With `--decision-workers N` the mesh runs N decision workers and the scheduler here is their applier, the serial
step: the core is then its check of each proposal (and the requests it decides itself, removals among them),
decoding covers the proposal batches, and answering is its replies to the workers (the workers answer the clients).

With `--batch K` the load sends its requests K at a time in `corral.req.batch` messages (`python -m loadtest
--batch K`); each request inside a batch counts as one request (the applier's: each proposal is one).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from nats.protocol.parser import Parser

from loadtest.cli import batch_size
from loadtest.leader_options import FOLLOWERS, add_decision_workers, add_load_size, check_decision_workers
from services import CORE_BUILD
from services.cli.args import duration
from services.core.cluster import Cluster
from services.local.mesh import DECIDER, start_mesh
from services.runtime import appends
from services.runtime.follower import LogFollower
from services.scheduler import app, applier, handlers
from services.scheduler import measure as scheduler_metrics

STEPS = ("core", "recording", "decoding_and_metrics", "answering", "reading", "appending", "folding", "rest")
"""The steps reported, in order: each exclusive of the others, summing to the window's CPU."""

Sums = dict[str, tuple[tuple[str, ...], tuple[str, ...]]]
"""Each step but the rest: the wrapped functions whose CPU it adds, and those (nested in them) it takes away."""
BUS_STEPS: Sums = {
    "reading": (("reading",), ()),
    "appending": (("appending",), ()),
    "folding": (("folding",), ()),
}
SCHEDULER_STEPS: Sums = {
    "core": (("apply",), ()),
    "recording": (("handle",), ("apply",)),
    "decoding_and_metrics": (("decide",), ("handle",)),
    "answering": (("answer",), ()),
    **BUS_STEPS,
}
APPLIER_STEPS: Sums = {
    "core": (("apply", "proposed"), ()),
    "recording": (("proposal",), ("apply", "proposed")),
    "decoding_and_metrics": (("decide", "decode"), ("proposal",)),
    "answering": (("reply",), ()),
    **BUS_STEPS,
}


class StepClock:
    """CPU seconds spent inside each wrapped function (nested ones included), and the window of requests."""

    def __init__(self) -> None:
        self.inside: dict[str, float] = {}
        self.requests = 0
        self.first: float | None = None
        self.last = 0.0

    def sync(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        """`function`, its CPU counted under `name`."""

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                self.inside[name] = self.inside.get(name, 0.0) + time.process_time() - began

        return timed

    def coroutine(
        self, name: str, function: Callable[..., Awaitable[Any]], *, request: bool, counts: bool = True
    ) -> Callable[..., Any]:
        """The coroutine function `function`, its CPU counted under `name` (it must not wait on I/O, or other tasks'
        CPU counts too); `request`: each call marks the window and (unless not `counts`: `counted` counts them
        instead) is one request decided."""

        @functools.wraps(function)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.process_time()
            if request and self.first is None:
                self.first = began
            try:
                return await function(*args, **kwargs)
            finally:
                ended = time.process_time()
                self.inside[name] = self.inside.get(name, 0.0) + ended - began
                if request:
                    self.requests += counts
                    self.last = ended

        return timed

    def counted(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """`function`, each call counted as one request decided (its CPU is not timed)."""

        @functools.wraps(function)
        def counting(*args: Any, **kwargs: Any) -> Any:
            self.requests += 1
            return function(*args, **kwargs)

        return counting

    def per_request_us(self, sums: Sums = SCHEDULER_STEPS) -> dict[str, float]:
        """Each step's exclusive CPU microseconds per request (`sums` says which wrapped functions make it up), the
        rest, and the window's total (`total`)."""
        if not self.requests or self.first is None:
            return {}
        window = self.last - self.first
        steps = {
            step: sum(self.inside.get(name, 0.0) for name in plus) - sum(self.inside.get(name, 0.0) for name in minus)
            for step, (plus, minus) in sums.items()
        }
        steps["rest"] = window - sum(steps.values())
        steps["total"] = window
        return {name: round(seconds * 1e6 / self.requests, 1) for name, seconds in steps.items()}


Wrapped = list[tuple[ModuleType | type, str, Callable[[Callable[..., Any]], Callable[..., Any]]]]


def bus_steps(clock: StepClock) -> Wrapped:
    """The steps on the bus (`BUS_STEPS`) either process takes, as `clock` wraps them."""
    return [
        (Parser, "parse", lambda f: clock.coroutine("reading", f, request=False)),
        (appends, "messages_of", lambda f: clock.sync("appending", f)),
        (LogFollower, "_fold", lambda f: clock.coroutine("folding", f, request=False)),
    ]


def scheduler_steps(clock: StepClock) -> Wrapped:
    """The scheduler's steps (`SCHEDULER_STEPS`), as `clock` wraps them."""
    return [
        *bus_steps(clock),
        (handlers, "_apply", lambda f: clock.sync("apply", f)),
        (app, "handle", lambda f: clock.sync("handle", f)),  # as `app` imported it from `handlers`
        (app, "_decide", lambda f: clock.coroutine("decide", f, request=True, counts=False)),  # a message
        (scheduler_metrics, "counted", clock.counted),  # each request answered, alone or inside a batch
        (app, "_answer", lambda f: clock.coroutine("answer", f, request=False)),
    ]


def applier_steps(clock: StepClock) -> Wrapped:
    """The applier's steps (`APPLIER_STEPS`), as `clock` wraps them: one request per proposal."""
    return [
        *bus_steps(clock),
        (handlers, "_apply", lambda f: clock.sync("apply", f)),
        (Cluster, "submit_proposed", lambda f: clock.sync("proposed", f)),
        (applier, "handle_proposal", lambda f: clock.sync("proposal", f)),  # as `applier` imported it
        (applier.Applier, "_decide", lambda f: clock.coroutine("decide", f, request=True)),
        (applier, "decode", lambda f: clock.sync("decode", f)),
        (applier, "send_reply", lambda f: clock.coroutine("reply", f, request=False)),
    ]


@contextlib.contextmanager
def clocked(wrapped: Wrapped) -> Iterator[None]:
    """`wrapped`'s functions replaced by their clocked wrappers (attributes, looked up at each call), restored on
    the way out."""
    saved = [(module, name, getattr(module, name)) for module, name, _ in wrapped]
    for module, name, wrap in wrapped:
        setattr(module, name, wrap(getattr(module, name)))
    try:
        yield
    finally:
        for module, name, function in saved:
            setattr(module, name, function)


def measure(nodes: int, users: int, seconds: float, workers: int = 0, batch: int = 1) -> dict[str, Any]:
    """Run the scheduler here (the applier of `workers` decision workers, when above 0) under the load test's Corral
    phase (its requests `batch` to a message); the figures of `StepClock.per_request_us`."""
    clock = StepClock()
    wrapped, sums = (applier_steps(clock), APPLIER_STEPS) if workers else (scheduler_steps(clock), SCHEDULER_STEPS)
    with tempfile.TemporaryDirectory(prefix="corral-leader-steps-") as folder:
        mesh = start_mesh(Path(folder) / "mesh", services=FOLLOWERS)
        try:
            for index in range(workers):
                mesh.start_service(DECIDER, instance=f"{DECIDER}-{index + 1}")
            env = {**mesh.env, "CORRAL_INSTANCE": "scheduler", "CORRAL_DECISION_WORKERS": str(workers)}
            os.environ.update(env)
            os.environ.setdefault("CORRAL_LOG_LEVEL", "WARNING")  # the figures, not the scheduler's log
            load = subprocess.Popen(
                [
                    sys.executable, "-m", "loadtest", "--nats-url", mesh.nats_url, "--nodes", str(nodes),
                    "--users", str(users), "--duration", str(seconds), "--tenants", "0", "--floor-duration", "0",
                    "--fixed-duration", "0", "--autoscaler-duration", "0", "--batch", str(batch), "--quiet", "--json",
                ],
                stdout=subprocess.PIPE,
            )  # fmt: skip
            threading.Thread(target=_stop_when_done, args=(load,), daemon=True).start()
            with clocked(wrapped), contextlib.suppress(SystemExit):
                runpy.run_module("services.scheduler", run_name="__main__", alter_sys=True)
            report = json.loads(load.communicate()[0] or b"{}")
        finally:
            mesh.close()
    corral = report.get("phases", {}).get("corral", {})
    return {
        "nodes": nodes,
        "users": users,
        "decision_workers": workers,
        "batch": batch,
        "core": CORE_BUILD,
        "requests": clock.requests,
        "requests_per_s": corral.get("requests_per_s"),
        "us_per_request": clock.per_request_us(sums),
    }


def _stop_when_done(load: subprocess.Popen[bytes]) -> None:
    """Once the load test ends, stop the scheduler as a supervisor would (SIGTERM)."""
    load.wait()
    os.kill(os.getpid(), signal.SIGTERM)


def text(figures: dict[str, Any]) -> str:
    """The figures as a table."""
    steps = figures["us_per_request"]
    who = f"applier of {figures['decision_workers']} decision workers" if figures["decision_workers"] else "scheduler"
    batches = f" in batches of {figures['batch']}" if figures.get("batch", 1) > 1 else ""
    lines = [
        f"leading {who} (the core's {figures.get('core', 'source')} build), {figures['nodes']:,} nodes, "
        f"{figures['users']} users: {figures['requests']:,} requests"
        f"{batches} decided, {steps.get('total', 0):,.0f} us of CPU per request between the first and the last",
        f"{'step':24} {'us/request':>10} {'share':>6}",
    ]
    total = steps.get("total") or 1.0
    for name in STEPS:
        lines.append(f"{name:24} {steps.get(name, 0):>10,.0f} {100 * steps.get(name, 0) / total:>5.0f}%")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, measure, print."""
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.leader_steps",
        description="Where the leading scheduler's CPU goes per request, under the load test's Corral phase: the "
        "core's decision, recording its events, decoding and metrics, the reply and ack, nats-py's reading, building "
        "the appended messages, folding what the log delivers, and the rest.",
    )
    add_load_size(parser, users=50)
    parser.add_argument("--duration", type=duration(), default=10.0, help="seconds of the Corral phase (default: 10)")
    add_decision_workers(parser)
    parser.add_argument(
        "--batch",
        type=batch_size,
        default=1,
        metavar="K",
        help="requests per message of the load (`python -m loadtest --batch K`), each request counted as one "
        "(default: 1)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    check_decision_workers(parser, args.decision_workers)
    figures = measure(args.nodes, args.users, args.duration, args.decision_workers, args.batch)
    print(json.dumps(figures) if args.json else text(figures))
    return 0 if figures["requests"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
