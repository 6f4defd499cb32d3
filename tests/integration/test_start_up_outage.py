"""A service starting while JetStream does not answer (a nats-server just restarted, a cluster electing a stream's
leader) waits for it, then serves: it never exits.

Its streams, its lease bucket, the scheduler's request consumer, the autoscaler's command client and its
election's look at the log were asked for once: a request that timed out ended the process with an unhandled error
(exit 1). nats-server is paused with SIGSTOP: connected, and nothing answers; the services run in the test's
process, so the outage begins right after a chosen step. A stream's leader is waited for 30 s before its info
request gives up; the tests shorten that wait, so an outage outlasting it fits their patience.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from nats.js import api

from schemas import Pending, ScheduleRequest
from schemas import subjects as s
from services.autoscaler.app import main as autoscaler_main
from services.client import Client
from services.client.base import Connection
from services.decider.app import main as decider_main
from services.local.mesh import Mesh
from services.runtime import replicas
from services.runtime.bus import Bus
from services.runtime.lease import Lease
from services.runtime.work_queue import pull
from services.scheduler.app import main as scheduler_main
from tests.integration.autoscaling import write_config
from tests.integration.conftest import (
    JETSTREAM_TIMEOUT_S,
    bus_of,
    cancelled,
    holds_within,
    nats_paused,
    paused,
    scheduler_answers,
    settings_of,
)

pytestmark = pytest.mark.anyio

OUTAGE_S = JETSTREAM_TIMEOUT_S + 1
"""Longer than a JetStream request waits for its answer."""


@pytest.fixture(autouse=True)
def short_leader_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream's leader is waited for 1 s instead of 30."""
    monkeypatch.setattr(replicas, "LEADER_SECONDS", 1.0)


class Outage:
    """nats-server paused the moment a chosen call of a service run in the test's process returns (`after`)."""

    def __init__(self, servers: Mesh, monkeypatch: pytest.MonkeyPatch, stack: contextlib.AsyncExitStack) -> None:
        self.servers, self.monkeypatch, self.stack = servers, monkeypatch, stack
        self.began = asyncio.Event()

    def after(self, owner: type, method: str, applies: Callable[..., bool]) -> None:
        """Pause once `owner.method` returns to a call `applies(self_or_first_argument, *args)` accepts."""
        original = getattr(owner, method)

        async def then_pause(first: Any, *args: Any, **kwargs: Any) -> Any:
            result = await original(first, *args, **kwargs)
            if applies(first, *args) and not self.began.is_set():
                await self.stack.enter_async_context(nats_paused(self.servers))
                self.began.set()
            return result

        self.monkeypatch.setattr(owner, method, then_pause)

    async def waited_out(self) -> None:
        """Once the outage began, let it last `OUTAGE_S`, then end it."""
        await asyncio.wait_for(self.began.wait(), timeout=10.0)
        await asyncio.sleep(OUTAGE_S)
        await self.stack.aclose()


@pytest.fixture
async def outage(servers: Mesh, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Outage]:
    async with contextlib.AsyncExitStack() as stack:
        yield Outage(servers, monkeypatch, stack)


async def test_a_lease_bucket_and_a_request_consumer_asked_for_while_jetstream_does_not_answer_come_once_it_does(
    servers: Mesh,
) -> None:
    async with bus_of(servers, "scheduler") as bus:
        config = api.ConsumerConfig(durable_name=s.REQUESTS_CONSUMER, ack_policy=api.AckPolicy.EXPLICIT)
        asked = asyncio.gather(bus.lease_bucket(), pull(bus, s.REQUESTS_SUBJECTS, s.REQUESTS_STREAM, config))
        await paused(servers, OUTAGE_S)
        bucket, requests = await asyncio.wait_for(asked, timeout=3 * JETSTREAM_TIMEOUT_S)
        assert await bucket.create("holder", b"me") >= 1
        await bus.js.publish(f"{s.PREFIX}.req.test", b"a request")
        assert [msg.data for msg in await requests.fetch(1, timeout=5.0)] == [b"a request"]


async def test_a_scheduler_starting_while_jetstream_does_not_answer_comes_up_and_serves(
    servers: Mesh, outage: Outage
) -> None:
    """The scheduler connects, and nats-server pauses at once: its streams' declaration meets the outage."""
    outage.after(Bus, "connect", lambda _settings, name, *_: name == "scheduler")
    scheduler = asyncio.ensure_future(scheduler_main(settings_of(servers)))
    try:
        await outage.waited_out()
        assert not scheduler.done()
        async with Client(servers.nats_url, timeout=10.0) as client:
            assert await holds_within(lambda: scheduler_answers(client), timeout=10.0)
            decision = await client.submit(ScheduleRequest("job", {"CPU": 1}), timeout=10.0)
        assert isinstance(decision, Pending)  # no nodes: decided, and waiting
        assert not scheduler.done()
    finally:
        await cancelled(scheduler)


async def test_a_decision_worker_starting_while_jetstream_does_not_answer_comes_up_and_decides(
    servers: Mesh, outage: Outage
) -> None:
    """A decision worker has its request stream, and nats-server pauses at once: its catching up with the log meets
    the outage; once it ends, the worker decides (with workers, the scheduler pulls no request itself)."""
    settings = dataclasses.replace(settings_of(servers), decision_workers=1)
    scheduler = asyncio.ensure_future(scheduler_main(settings))
    worker: asyncio.Future[None] | None = None
    try:
        async with Client(servers.nats_url, timeout=10.0) as client:
            assert await holds_within(lambda: scheduler_answers(client), timeout=10.0)
            outage.after(Bus, "ensure_streams", lambda _bus, names=(), *_: tuple(names) == (s.REQUESTS_STREAM,))
            worker = asyncio.ensure_future(decider_main(settings))
            await outage.waited_out()
            assert not worker.done()
            decision = await client.submit(ScheduleRequest("job", {"CPU": 1}), timeout=10.0)
        assert isinstance(decision, Pending)  # no nodes: decided, and waiting
        assert not worker.done()
    finally:
        if worker is not None:
            await cancelled(worker)
        await cancelled(scheduler)


@pytest.mark.parametrize(
    ("owner", "method", "applies"),
    [
        (Lease, "acquire", lambda lease: lease.key == s.AUTOSCALER_LEASE_KEY),
        (Connection, "connect", lambda client: client.name == "autoscaler"),
    ],
    ids=["its command client connecting", "its election"],
)
async def test_an_autoscaler_elected_while_jetstream_does_not_answer_comes_up_and_serves(
    servers: Mesh, outage: Outage, tmp_path: Path, owner: type, method: str, applies: Callable[..., bool]
) -> None:
    """The autoscaler wins its lease, or then connects its command client, and nats-server pauses at once."""
    outage.after(owner, method, applies)
    settings = dataclasses.replace(settings_of(servers), autoscaler_config=str(write_config(tmp_path)))
    autoscaler = asyncio.ensure_future(autoscaler_main(settings))
    try:
        await outage.waited_out()
        assert not autoscaler.done()
        async with Client(servers.nats_url, timeout=10.0) as client:
            assert (await client.wait_autoscaler(timeout=15.0)).instance == settings.instance
        assert not autoscaler.done()
    finally:
        await cancelled(autoscaler)
