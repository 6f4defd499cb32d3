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

    async def flowing(self, answers: int = 5, timeout: float = 30.0) -> None:
        """Wait until `answers` requests were answered: the stream is going, the kill comes in its middle."""

        async def answered() -> bool:
            return len(self.answered) >= answers

        assert await holds_within(answered, timeout), f"{len(self.answered)} answers within {timeout} s"

    def in_flight_at(self, moment: float) -> int:
        """How many requests were sent before `moment` and answered after it."""
        return sum(sent <= moment < self.answered.get(key, math.inf) for key, sent in self.sent.items())
