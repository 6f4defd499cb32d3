"""Polling loops that end at their deadline even when a cancellation is lost.

`asyncio.timeout` ends a wait by cancelling the task. On Python 3.11, `asyncio.wait_for` (inside nats-py's requests
and `next_msg`) drops that cancellation when what it awaits completes in the same moment, and a loop that polls
under the timeout then never ends (seen: a resent request polling for its decision for ten minutes on a busy
machine). Such a loop runs under `asyncio.timeout_at(deadline)` and calls `check(deadline)` at each round.
"""

from __future__ import annotations

import asyncio


def deadline_in(seconds: float) -> float:
    """The running loop's time `seconds` from now."""
    return asyncio.get_running_loop().time() + seconds


def check(deadline: float) -> None:
    """Raise `TimeoutError` once the running loop's clock has reached `deadline`."""
    if asyncio.get_running_loop().time() >= deadline:
        raise TimeoutError
