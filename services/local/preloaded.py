"""Service processes forked from a parent that imported the services once (multiprocessing's fork server).

A fresh interpreter spends about 0.6 s of CPU importing a service (nats, redis, OpenTelemetry, the core) before it
does anything; a test suite that starts a thousand service processes spends most of its time there. A process forked
from the preloaded parent is the same service in a process of its own (its pid, its signals, its exit code, its log
file), started for a few milliseconds of CPU. `start_mesh(preloaded=True)` starts its services this way.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import runpy
import subprocess
import sys
import types
from collections.abc import Iterator
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from pathlib import Path

from services import CORE_BUILD, compiled_core

PRELOADED = (
    "services.labels.app",
    "services.taints.app",
    "services.vclusters.app",
    "services.scheduler.app",
    "services.decider.app",
    "services.autoscaler.app",
    "services.gateway.app",
    "anyio._backends._asyncio",  # imported by `anyio.run` otherwise: a quarter of a forked service's start
    "services.local.warm_start",  # last: it freezes the heap the imports above left
)
"""What the fork server imports before it forks anything."""


class PreloadedService:
    """A service process forked from the preloaded parent, with the part of `subprocess.Popen` a mesh uses."""

    def __init__(self, process: BaseProcess) -> None:
        self.process = process

    @property
    def pid(self) -> int:
        """The service process's id."""
        assert self.process.pid is not None, "started"
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        """Its exit code once it exited (minus the signal that ended it), else None."""
        return self.process.exitcode

    def poll(self) -> int | None:
        """The exit code if it exited, else None (never waits)."""
        return self.process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for it to exit; `subprocess.TimeoutExpired` after `timeout` seconds."""
        self.process.join(timeout)
        code = self.process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(f"services ({self.pid})", timeout or 0.0)
        return code

    def send_signal(self, signal: int) -> None:
        """Send `signal` unless it already exited."""
        if self.process.exitcode is None:
            os.kill(self.pid, signal)

    def kill(self) -> None:
        """SIGKILL."""
        self.process.kill()


def start(name: str, env: dict[str, str], log: Path) -> PreloadedService:
    """Fork `python -m services.<name>` from the preloaded parent, in environment `env`, its output appended to
    `log`."""
    log.touch()  # there once this returns, as `python -m` with its output redirected to it
    process = _context().Process(target=_run, args=(name, env, str(log)), name=f"corral-{name}", daemon=True)
    with _main_left_behind():
        process.start()
    return PreloadedService(process)


@contextlib.contextmanager
def _main_left_behind() -> Iterator[None]:
    """While a service is started, a `__main__` without a file or a module name: multiprocessing would otherwise run
    the parent's main script again in the child before `_run` (`.venv/bin/corral`, which imports the whole CLI, or
    `python -m services.cli.demo.mesh`): 0.1 to 0.4 s of CPU per service that it never uses."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


@functools.cache
def _context() -> ForkServerContext:
    context = multiprocessing.get_context("forkserver")
    assert isinstance(context, ForkServerContext)
    context.set_forkserver_preload(list(PRELOADED))
    return context


def _run(name: str, env: dict[str, str], log: str) -> None:
    """In the forked process: its name in `ps -o comm` and `top`, the environment and output of the service, then
    its `__main__`."""
    with contextlib.suppress(OSError):  # Linux names a process by /proc/self/comm; elsewhere it keeps its name
        Path("/proc/self/comm").write_text(f"corral-{name}"[:15])
    os.environ.clear()
    os.environ.update(env)
    output = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    for fd, stream in ((1, sys.stdout), (2, sys.stderr)):
        if stream is not None:
            stream.flush()
        os.dup2(output, fd)
    os.close(output)
    build = compiled_core.requested(env)
    if build in compiled_core.BUILDS and build != CORE_BUILD and not compiled_core.unusable():  # else settings refuse
        print(
            f"corral {name}: {compiled_core.SETTING} {build!r}: forked from a parent that runs the {CORE_BUILD} core,"
            " which it keeps: start the mesh with the same setting",
            file=sys.stderr,
        )
        sys.exit(2)
    runpy.run_module(f"services.{name}", run_name="__main__", alter_sys=True)
