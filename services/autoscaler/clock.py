"""The nats-server's clock: the one clock the autoscaler decides by.

The log stores every event with the server's time, and a launched node's idle time is counted from those times
(`Launch.idle_since`), so that a restarted autoscaler, or another instance taking over, goes on counting. Comparing
them with this process's own clock would mix two clocks: a skew between them would drain nodes early or late, and
differently after a failover to a machine with another skew. So every round reads the server's time and decides by
it, and the times an autoscaler writes in its events (`requested_at`, `at`, `failed_at`) are the server's too:
every time the autoscaler compares comes from one clock, whichever machine it runs on.
"""

from __future__ import annotations

import time
from datetime import datetime

import msgspec
from nats.aio.client import Client as NatsClient

from schemas import subjects as s

READ_SECONDS = 5.0
"""How long reading the server's time may take (a round not done then is tried again at the next)."""


class _StreamTime(msgspec.Struct):
    """The part of a stream info answer read here: when the server answered (nats-server 2.10 and later)."""

    ts: datetime | None = None


_STREAM_TIME = msgspec.json.Decoder(_StreamTime)


class ServerClock:
    """The nats-server's time, read once per round; `now()` between reads (this process's clock plus the offset
    last measured, the network's delay aside)."""

    def __init__(self, nc: NatsClient) -> None:
        self.nc = nc
        self.offset = 0.0
        """The server's clock minus this process's, as last read (0 before the first read)."""

    async def read(self) -> float:
        """The server's time now (Unix seconds), from a stream info answer of the event log; a server too old to
        say (or an unreadable answer) leaves the offset as it was."""
        answer = await self.nc.request(f"$JS.API.STREAM.INFO.{s.EVENTS_STREAM}", b"", timeout=READ_SECONDS)
        try:
            told = _STREAM_TIME.decode(answer.data).ts
        except msgspec.DecodeError:
            told = None
        if told is not None:
            self.offset = told.timestamp() - time.time()
        return self.now()

    def now(self) -> float:
        """The server's time as last measured, carried forward by this process's clock."""
        return time.time() + self.offset
