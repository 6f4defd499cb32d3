"""The event stream's keep-alive: a comment while the log is quiet, the events unchanged, the log closed with it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from litestar.response import ServerSentEventMessage

from services.gateway.events import KEEP_ALIVE, kept_alive


def test_a_quiet_stream_sends_keep_alive_comments_between_its_events() -> None:
    closed = asyncio.Event()

    async def slow_log() -> AsyncGenerator[ServerSentEventMessage]:
        try:
            yield ServerSentEventMessage("first", event="NodeRegistered", id=1)
            await asyncio.sleep(0.35)
            yield ServerSentEventMessage("second", event="NodeDied", id=2)
            await asyncio.sleep(3600)
        finally:
            closed.set()

    async def read() -> list[tuple[str | None, str | None]]:
        stream = kept_alive(slow_log(), interval=0.1)
        seen = []
        async for message in stream:
            seen.append((message.comment, message.event))
            if message.event == "NodeDied":
                break
        await stream.aclose()  # type: ignore[attr-defined]
        return seen

    seen = asyncio.run(asyncio.wait_for(read(), timeout=5))
    assert seen[0] == (None, "NodeRegistered") and seen[-1] == (None, "NodeDied")
    assert set(seen[1:-1]) == {("keep-alive", None)} and len(seen) >= 3
    assert closed.is_set()


def test_a_keep_alive_is_a_comment_line_alone_which_dispatches_no_event() -> None:
    assert KEEP_ALIVE.encode() == b": keep-alive\r\n\r\n"
