"""The event streams' shared feed: a keep-alive comment while the log is quiet, events unchanged, and a stream that
falls out of the feed's window dropped with a comment saying how to resume."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

from schemas import NodeDied
from services.client import Client
from services.gateway.backlog import Backlog
from services.gateway.events import FELL_BEHIND, KEEP_ALIVE, Watching, log_from
from services.gateway.feed import Feed
from services.runtime.codec import encode
from services.runtime.log_reader import LogEntry


class SlowBus:
    """A log that is empty when the feed starts, then gets `count` events `pause` seconds apart."""

    def __init__(self, count: int, pause: float) -> None:
        self.count, self.pause = count, pause

    async def last_sequence(self) -> int:
        return 0

    async def read_log(self, start: int) -> AsyncIterator[LogEntry]:
        for sequence in range(start, start + self.count):
            await asyncio.sleep(self.pause)
            event = NodeDied(node_id=f"n{sequence}", event_id=f"e{sequence}")
            yield LogEntry(sequence, event, encode(event))
        await asyncio.sleep(3600)


def watching(bus: SlowBus, window: int = 1024) -> Watching:
    client = cast(Client, type("FakeClient", (), {"bus": bus})())
    return Watching(Feed(client, window), Backlog(client))


async def read(stream: AsyncIterator[bytes], until: bytes) -> list[bytes]:
    seen = []
    async for chunk in stream:
        seen.append(chunk)
        if until in chunk:
            break
    return seen


def test_a_quiet_stream_sends_keep_alive_comments_between_its_events() -> None:
    async def run() -> list[bytes]:
        shared = watching(SlowBus(2, 0.35))
        try:
            return await read(log_from(shared, 1, asyncio.Event(), keep_alive=0.1), b"id: 2")
        finally:
            await shared.feed.close()

    seen = asyncio.run(asyncio.wait_for(run(), timeout=5))
    assert seen[0] == KEEP_ALIVE.encode() and b"id: 1\r\nevent: NodeDied\r\n" in b"".join(seen)
    assert seen[-1].startswith(b"id: 2\r\nevent: NodeDied\r\ndata: {")
    assert set(seen) - {KEEP_ALIVE.encode()} == {chunk for chunk in seen if b"data: " in chunk}


def test_a_stream_that_falls_out_of_the_window_is_dropped_with_a_comment() -> None:
    async def run() -> tuple[list[bytes], bool]:
        shared = watching(SlowBus(40, 0.0), window=4)
        dropped = asyncio.Event()
        stream = log_from(shared, 1, dropped)
        try:
            first = await anext(stream)  # then this reader stops reading while the log goes on
            await asyncio.wait_for(dropped.wait(), 5)
            rest = [chunk async for chunk in stream]
            return [first, *rest], dropped.is_set()
        finally:
            await shared.feed.close()

    seen, dropped = asyncio.run(asyncio.wait_for(run(), timeout=5))
    assert dropped and seen[-1] == FELL_BEHIND.encode()


def test_a_keep_alive_is_a_comment_line_alone_which_dispatches_no_event() -> None:
    assert KEEP_ALIVE.encode() == b": keep-alive\r\n\r\n"
    assert cast(Any, FELL_BEHIND).data is None
