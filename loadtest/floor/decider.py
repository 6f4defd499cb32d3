"""The bus floor: Corral's request pattern through its own streams, answered by a decider that decides nothing.

Run as `python -m loadtest.floor --nats-url URL` it is that decider, in a process of its own like the
scheduler: it fetches batches from a durable pull consumer, appends one event per message with publish_async
and gather, replies to each message's inbox header and acks, until SIGTERM; then it prints its batch figures. A
request batch (`loadtest.req.batch`, with `python -m loadtest --batch K`) is one message: one event carrying it, one
`BatchReply` of one no-op answer per request inside, one ack.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import signal
import sys
import time
from typing import TypedDict

import msgspec
import nats.errors
import nats.js.errors
from nats.js import api

from schemas import Placed
from schemas import subjects as s
from schemas.commands import SubmitActor
from schemas.replies import Accepted, BatchReply, RequestReply
from services.runtime.bus import Bus
from services.runtime.codec import encode
from services.runtime.connection import STREAMS
from services.runtime.settings import Settings
from services.runtime.work_queue import pull

REQUESTS_STREAM = "LOADTEST_FLOOR"
REQUESTS_SUBJECTS = "loadtest.req.>"
EVENTS_STREAM = "LOADTEST_FLOOR_EVENTS"
EVENTS_SUBJECTS = "loadtest.evt.>"
CONSUMER = "floor"
BATCH = 256
"""The scheduler's default `request_batch`."""

_CORRAL_CONFIGS = {config.name: config for config in STREAMS}
FLOOR_STREAMS = (
    dataclasses.replace(
        _CORRAL_CONFIGS[s.REQUESTS_STREAM],
        name=REQUESTS_STREAM,
        subjects=[REQUESTS_SUBJECTS],
        description="Load test: requests for the no-op decider",
    ),
    dataclasses.replace(
        _CORRAL_CONFIGS[s.EVENTS_STREAM],
        name=EVENTS_STREAM,
        subjects=[EVENTS_SUBJECTS],
        description="Load test: the no-op decider's events",
    ),
)
"""Copies of Corral's request and event streams (same storage, retention, dedup window), under other names."""


async def create_streams(bus: Bus, replicas: int = 1) -> None:
    """Create the floor's streams afresh, each on `replicas` servers (any left over from an earlier run are deleted
    first)."""
    await delete_streams(bus)
    for config in FLOOR_STREAMS:
        await bus.js.add_stream(dataclasses.replace(config, num_replicas=replicas))


async def delete_streams(bus: Bus) -> None:
    """Delete the floor's streams (missing ones are fine)."""
    for config in FLOOR_STREAMS:
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await bus.js.delete_stream(config.name)  # type: ignore[arg-type]


class _Kind(msgspec.Struct):
    """A request inside a batch, read only as far as its kind (every other field is skipped)."""

    kind: str


class _Kinds(msgspec.Struct):
    """A `RequestBatch`, read only as far as the kind of each request: all a no-op answer needs."""

    requests: list[_Kind]


_BATCH_KINDS = msgspec.json.Decoder(_Kinds)
_SCHEDULE = SubmitActor.__struct_config__.tag


class DeciderFigures(TypedDict):
    """What the no-op decider reports when it stops."""

    batches: int
    """Fetches from the work queue."""
    requests: int
    """Requests answered, each request inside a request batch counted."""
    messages: int
    """Messages answered (a request batch is one)."""
    request_batches: int
    """Messages that were request batches."""
    mean_batch: float
    """Messages per fetch."""
    mean_batch_ms: float
    busy_share: float


class NoOpDecider:
    """Fetch a batch, append one event per message, reply to each inbox, ack: nothing is decided; a request batch
    is answered with one no-op answer per request inside, as the scheduler answers it with one decision each."""

    def __init__(self, bus: Bus, batch: int = BATCH) -> None:
        self.bus, self.batch = bus, batch
        self.batches = self.requests = self.messages = self.request_batches = 0
        self.busy = 0.0
        self.began = time.perf_counter()
        self.placed = encode(Placed("floor", "floor-node"))
        self.accepted = encode(Accepted(message="floor"))
        self.placed_reply: RequestReply = Placed("floor", "floor-node")
        self.accepted_reply: RequestReply = Accepted(message="floor")
        self.ready = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until `stop` is set."""
        config = api.ConsumerConfig(
            durable_name=CONSUMER, ack_policy=api.AckPolicy.EXPLICIT, ack_wait=10.0, max_ack_pending=-1
        )
        consumer = await pull(self.bus, REQUESTS_SUBJECTS, REQUESTS_STREAM, config)  # the scheduler's own fetch
        self.began = time.perf_counter()
        self.ready.set()
        try:
            while not stop.is_set():
                try:
                    batch = await consumer.fetch(self.batch, timeout=0.5)
                except TimeoutError:
                    continue
                fetched = time.perf_counter()
                futures = []
                for msg in batch:
                    msg_id = (msg.headers or {}).get("Nats-Msg-Id", "")
                    subject = f"loadtest.evt.actor.{s.token(msg_id or 'unknown')}"
                    headers = {"Nats-Msg-Id": f"evt-{msg_id}"}
                    futures.append(await self.bus.js.publish_async(subject, msg.data, headers=headers))
                await asyncio.wait_for(asyncio.gather(*futures), timeout=10.0)
                requests = len(batch)
                for msg in batch:
                    inbox = (msg.headers or {}).get(s.REPLY_HEADER)
                    if msg.subject.endswith(".batch"):
                        reply, inside = self.batch_answer(msg.data)
                        requests += inside - 1
                        self.request_batches += 1
                    else:
                        reply = self.placed if msg.subject.endswith(".schedule") else self.accepted
                    if inbox:
                        await self.bus.nc.publish(inbox, reply)
                    await msg.ack()
                self.batches += 1
                self.messages += len(batch)
                self.requests += requests
                self.busy += time.perf_counter() - fetched
        finally:
            with contextlib.suppress(nats.errors.Error):
                await consumer.unsubscribe()

    def batch_answer(self, data: bytes) -> tuple[bytes, int]:
        """A request batch's `BatchReply` (Placed for a submit, Accepted for anything else, in its order) and how
        many requests it holds; an unreadable batch is answered as one request would be (Accepted)."""
        try:
            kinds = _BATCH_KINDS.decode(data).requests
        except msgspec.DecodeError:
            return self.accepted, 1
        replies = [self.placed_reply if one.kind == _SCHEDULE else self.accepted_reply for one in kinds]
        return encode(BatchReply(replies)), len(replies)

    def figures(self) -> DeciderFigures:
        """Batches, requests, messages, request batches, the mean batch and the time spent per batch."""
        elapsed = time.perf_counter() - self.began
        return DeciderFigures(
            batches=self.batches,
            requests=self.requests,
            messages=self.messages,
            request_batches=self.request_batches,
            mean_batch=round(self.messages / self.batches, 1) if self.batches else 0.0,
            mean_batch_ms=round(self.busy * 1000 / self.batches, 3) if self.batches else 0.0,
            busy_share=round(self.busy / elapsed, 3) if elapsed > 0 else 0.0,
        )


def combined(figures: list[DeciderFigures]) -> DeciderFigures:
    """The figures of several deciders as one: counts summed, time per batch and busy share averaged."""
    batches = sum(one["batches"] for one in figures)
    messages = sum(one["messages"] for one in figures)
    busy_ms = sum(one["mean_batch_ms"] * one["batches"] for one in figures)
    return DeciderFigures(
        batches=batches,
        requests=sum(one["requests"] for one in figures),
        messages=messages,
        request_batches=sum(one["request_batches"] for one in figures),
        mean_batch=round(messages / batches, 1) if batches else 0.0,
        mean_batch_ms=round(busy_ms / batches, 3) if batches else 0.0,
        busy_share=round(sum(one["busy_share"] for one in figures) / len(figures), 3) if figures else 0.0,
    )


async def serve(nats_url: str, batch: int) -> DeciderFigures:
    """Connect, print `ready`, decide nothing until SIGTERM or SIGINT, and return the figures."""
    bus = await Bus.connect(Settings(nats_url=nats_url), "loadtest-floor")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    decider = NoOpDecider(bus, batch)
    try:
        task = asyncio.create_task(decider.run(stop))
        ready = asyncio.create_task(decider.ready.wait())
        await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            ready.cancel()
            await task
        print(json.dumps({"ready": True}), flush=True)
        await task
    finally:
        await bus.close()
    return decider.figures()


def main(argv: list[str] | None = None) -> int:
    """The decider process: `python -m loadtest.floor --nats-url URL [--batch 256]`."""
    parser = argparse.ArgumentParser(prog="python -m loadtest.floor", description=__doc__)
    parser.add_argument("--nats-url", required=True)
    parser.add_argument("--batch", type=int, default=BATCH)
    args = parser.parse_args(argv)
    figures = asyncio.run(serve(args.nats_url, args.batch))
    print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
