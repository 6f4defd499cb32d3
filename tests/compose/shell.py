"""Commands with a deadline, polls with a deadline, and the timed steps of a run."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


class ComposeTestError(Exception):
    """A check of the deployment failed; the message says what a user would have seen."""


class ServiceFailedError(ComposeTestError):
    """A service cannot start (it exited, keeps restarting, fails its healthcheck): no wait outlasts it."""


def run(
    command: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    input_bytes: bytes | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `command` to its end within `timeout` seconds; with `check`, a non-zero exit is a ComposeTestError
    carrying the command's output."""
    try:
        result = subprocess.run(
            list(command),
            capture_output=True,
            text=input_bytes is None,
            input=input_bytes,
            timeout=timeout,
            env=dict(env) if env is not None else None,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise ComposeTestError(f"`{' '.join(command)}` ran past its {timeout:g} s deadline") from error
    if isinstance(result.stdout, bytes):
        result = subprocess.CompletedProcess(
            result.args,
            result.returncode,
            result.stdout.decode(errors="replace"),
            result.stderr.decode(errors="replace"),
        )
    if check and result.returncode != 0:
        raise ComposeTestError(
            f"`{' '.join(command)}` exited {result.returncode}:\n{tail(result.stdout + result.stderr, 40)}"
        )
    return result


def tail(text: str, lines: int) -> str:
    """The last `lines` lines of `text`."""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def wait_for(what: str, probe: Callable[[], T | None], deadline_s: float, every_s: float = 1.0) -> T:
    """Call `probe` until it returns something other than None (returned), or fail naming `what` once
    `deadline_s` passed; an exception from the last probe is chained."""
    end = time.monotonic() + deadline_s
    last_error: Exception | None = None
    while True:
        try:
            found = probe()
        except ServiceFailedError:
            raise
        except ComposeTestError as error:
            last_error, found = error, None
        if found is not None:
            return found
        if time.monotonic() >= end:
            detail = f": {last_error}" if last_error else ""
            raise ComposeTestError(f"{what}: not within {deadline_s:g} s{detail}") from last_error
        time.sleep(every_s)


@dataclass
class Steps:
    """The steps of a run, each printed with how long it took as it ends, and all of them again at the end."""

    taken: list[tuple[str, float, bool]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time one step; it is recorded as failed when its body raises."""
        print(f"-- {name}", flush=True)
        begun = time.monotonic()
        ok = False
        try:
            yield
            ok = True
        finally:
            took = time.monotonic() - begun
            self.taken.append((name, took, ok))
            print(f"   {'ok' if ok else 'FAILED'} in {took:.1f} s", flush=True)

    def summary(self) -> str:
        """Every step with its time, and the whole run's."""
        rows = [f"{took:7.1f} s  {'ok    ' if ok else 'FAILED'}  {name}" for name, took, ok in self.taken]
        rows.append(f"{time.monotonic() - self.started:7.1f} s  total")
        return "\n".join(rows)


def say(message: str) -> None:
    """One line of progress, at once."""
    print(f"   {message}", file=sys.stdout, flush=True)
