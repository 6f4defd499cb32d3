"""Requests sent over a stretch of time, each one's sending and answer timed: a test that kills a process "mid-stream"
waits until the stream is flowing, kills, and then shows that requests were in flight at the kill (sent, not yet
answered), instead of trusting a sleep to have placed the kill there."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tests.integration.conftest import holds_within

T = TypeVar("T")


class Timed:
    """When each request was sent and answered, on the event loop's clock."""

    def __init__(self) -> None:
        self.sent: dict[str, float] = {}
        self.answered: dict[str, float] = {}

    async def send(self, key: str, call: Callable[[], Awaitable[T]]) -> T:
        """`call()` as the request named `key`, timed."""
        loop = asyncio.get_running_loop()
        self.sent[key] = loop.time()
        result = await call()
        self.answered[key] = loop.time()
        return result

    async def flowing(self, answers: int = 5, timeout: float = 30.0) -> float:
        """Wait until `answers` requests were answered and one is in flight: the stream is going. Returns the
        moment (the loop's clock) with a request in flight, with no turn of the loop after it, so a kill that
        follows at once comes in the stream's middle (a fast scheduler answers a request before the next is sent,
        so a kill at any other moment may fall between two requests)."""
        loop = asyncio.get_running_loop()

        async def answered_and_in_flight() -> bool:
            return len(self.answered) >= answers and self.in_flight_at(loop.time()) > 0

        assert await holds_within(answered_and_in_flight, timeout), (
            f"{len(self.answered)} answers within {timeout} s, and none in flight"
        )
        return loop.time()

    def in_flight_at(self, moment: float) -> int:
        """How many requests were sent before `moment` and answered after it."""
        return sum(sent <= moment < self.answered.get(key, math.inf) for key, sent in self.sent.items())
