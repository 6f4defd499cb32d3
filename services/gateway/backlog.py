"""The log's past for the event streams that ask for it: read in fixed chunks by a bounded few readers, each chunk
rendered once and kept for the streams that ask for it next (most read the same history)."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass

from services.client import Client
from services.gateway.feed import rendered

CHUNK_EVENTS = 256
"""The entries of one chunk: sequences `k * CHUNK_EVENTS + 1` to `(k + 1) * CHUNK_EVENTS`."""
READERS = 2
"""How many chunks are read from the bus at once, whatever the number of streams: each read is one short-lived
consumer, so the streams never use more than this many of the stream's consumers for the past."""
CHUNKS_KEPT = 64
"""How many whole chunks stay rendered for the next stream (about 16,000 entries)."""


def after_chunk(sequence: int) -> int:
    """The first sequence of the chunk after the one holding `sequence`."""
    return ((sequence - 1) // CHUNK_EVENTS + 1) * CHUNK_EVENTS + 1


@dataclass(frozen=True, slots=True)
class Chunk:
    """The entries of one chunk that the log held when it was read, rendered; `whole` when no later append can
    add to it (the log had gone past its end)."""

    sequences: list[int]
    messages: list[bytes]
    whole: bool


class Backlog:
    """The chunks of the log's past, read through at most `READERS` consumers at a time."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._gate = asyncio.Semaphore(READERS)
        self._chunks: OrderedDict[int, asyncio.Task[Chunk]] = OrderedDict()

    async def chunk_of(self, sequence: int) -> Chunk:
        """The chunk holding `sequence`: kept, being read for another stream, or read now."""
        key = (sequence - 1) // CHUNK_EVENTS
        task = self._chunks.get(key)
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            task = asyncio.ensure_future(self._read(key))
            self._chunks[key] = task
            while len(self._chunks) > CHUNKS_KEPT:
                self._chunks.popitem(last=False)
        self._chunks.move_to_end(key)
        chunk = await asyncio.shield(task)
        if not chunk.whole and self._chunks.get(key) is task:
            del self._chunks[key]  # the log may grow into it: read it again next time
        return chunk

    async def _read(self, key: int) -> Chunk:
        first, last = key * CHUNK_EVENTS + 1, (key + 1) * CHUNK_EVENTS
        async with self._gate:
            entries = await self._client.bus.read_batch(first, CHUNK_EVENTS)
        kept = [entry for entry in entries if entry.sequence <= last]
        whole = len({entry.sequence for entry in entries}) == CHUNK_EVENTS  # a batch gives several entries
        return Chunk([entry.sequence for entry in kept], [rendered(entry) for entry in kept], whole)
