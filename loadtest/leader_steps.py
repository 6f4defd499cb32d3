"""Where the leading scheduler's CPU goes, per request, measured without a profiler.

`python -m loadtest.leader_steps` starts a mesh without its scheduler, runs the scheduler in this process with
`time.process_time` read around its steps, drives it with `python -m loadtest` (the closed-loop Corral phase only)
and prints the CPU microseconds per request (a submit or a removal) of each step: the core's decision, recording
its events for the writer, decoding the request and the metrics, the reply and the ack, and the rest (fetching,
appending and its acks, reading the batches back, the election check, asyncio). The window runs from the first
request decided to the last. cProfile inflates Python calls against C several times, so its shares mislead for
this split (docs/throughput.md); two clock reads around a step cost about a microsecond.
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

from services.cli.args import duration, positive_int
from services.local.mesh import start_mesh
from services.scheduler import app, handlers

FOLLOWERS = ("labels", "taints", "vclusters")
"""The services the mesh runs beside the scheduler this process runs."""
STEPS = ("core", "recording", "decoding_and_metrics", "answering", "rest")
"""The steps reported, in order: each exclusive of the others, summing to the window's CPU."""


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

    def coroutine(self, name: str, function: Callable[..., Awaitable[Any]], *, request: bool) -> Callable[..., Any]:
        """The coroutine function `function`, its CPU counted under `name` (it must not wait on I/O, or other tasks'
        CPU counts too); `request`: each call is one request decided, and marks the window."""

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
                    self.requests += 1
                    self.last = ended

        return timed

    def per_request_us(self) -> dict[str, float]:
        """Each step's exclusive CPU microseconds per request, and the window's total (`total`)."""
        if not self.requests or self.first is None:
            return {}
        inside = self.inside
        window = self.last - self.first
        steps = {
            "core": inside.get("apply", 0.0),
            "recording": inside.get("handle", 0.0) - inside.get("apply", 0.0),
            "decoding_and_metrics": inside.get("decide", 0.0) - inside.get("handle", 0.0),
            "answering": inside.get("answer", 0.0),
        }
        steps["rest"] = window - sum(steps.values())
        steps["total"] = window
        return {name: round(seconds * 1e6 / self.requests, 1) for name, seconds in steps.items()}


@contextlib.contextmanager
def clocked_scheduler(clock: StepClock) -> Iterator[None]:
    """The scheduler's steps wrapped by `clock` (module attributes, looked up at each call), restored on the way out."""
    wrapped: list[tuple[ModuleType, str, Callable[..., Any]]] = [
        (handlers, "_apply", lambda f: clock.sync("apply", f)),
        (app, "handle", lambda f: clock.sync("handle", f)),  # as `app` imported it from `handlers`
        (app, "_decide", lambda f: clock.coroutine("decide", f, request=True)),
        (app, "_answer", lambda f: clock.coroutine("answer", f, request=False)),
    ]
    saved = [(module, name, getattr(module, name)) for module, name, _ in wrapped]
    for module, name, wrap in wrapped:
        setattr(module, name, wrap(getattr(module, name)))
    try:
        yield
    finally:
        for module, name, function in saved:
            setattr(module, name, function)


def measure(nodes: int, users: int, seconds: float) -> dict[str, Any]:
    """Run the scheduler here under the load test's Corral phase; the figures of `StepClock.per_request_us`."""
    clock = StepClock()
    with tempfile.TemporaryDirectory(prefix="corral-leader-steps-") as folder:
        mesh = start_mesh(Path(folder) / "mesh", services=FOLLOWERS)
        try:
            os.environ.update({**mesh.env, "CORRAL_INSTANCE": "scheduler"})
            os.environ.setdefault("CORRAL_LOG_LEVEL", "WARNING")  # the figures, not the scheduler's log
            load = subprocess.Popen(
                [
                    sys.executable, "-m", "loadtest", "--nats-url", mesh.nats_url, "--nodes", str(nodes),
                    "--users", str(users), "--duration", str(seconds), "--tenants", "0", "--floor-duration", "0",
                    "--fixed-duration", "0", "--autoscaler-duration", "0", "--quiet", "--json",
                ],
                stdout=subprocess.PIPE,
            )  # fmt: skip
            threading.Thread(target=_stop_when_done, args=(load,), daemon=True).start()
            with clocked_scheduler(clock), contextlib.suppress(SystemExit):
                runpy.run_module("services.scheduler", run_name="__main__", alter_sys=True)
            report = json.loads(load.communicate()[0] or b"{}")
        finally:
            mesh.close()
    corral = report.get("phases", {}).get("corral", {})
    return {
        "nodes": nodes,
        "users": users,
        "requests": clock.requests,
        "requests_per_s": corral.get("requests_per_s"),
        "us_per_request": clock.per_request_us(),
    }


def _stop_when_done(load: subprocess.Popen[bytes]) -> None:
    """Once the load test ends, stop the scheduler as a supervisor would (SIGTERM)."""
    load.wait()
    os.kill(os.getpid(), signal.SIGTERM)


def text(figures: dict[str, Any]) -> str:
    """The figures as a table."""
    steps = figures["us_per_request"]
    lines = [
        f"leading scheduler, {figures['nodes']:,} nodes, {figures['users']} users: {figures['requests']:,} requests "
        f"decided, {steps.get('total', 0):,.0f} us of CPU per request between the first and the last",
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
        "core's decision, recording its events, decoding and metrics, the reply and ack, and the rest.",
    )
    parser.add_argument("--nodes", type=positive_int, default=1000, help="simulated nodes (default: 1000)")
    parser.add_argument("--users", type=positive_int, default=50, help="simulated users (default: 50)")
    parser.add_argument("--duration", type=duration(), default=10.0, help="seconds of the Corral phase (default: 10)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    figures = measure(args.nodes, args.users, args.duration)
    print(json.dumps(figures) if args.json else text(figures))
    return 0 if figures["requests"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
