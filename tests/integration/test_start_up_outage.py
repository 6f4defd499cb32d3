"""A service starting while JetStream does not answer (a nats-server just restarted, a cluster electing a stream's
leader) waits for it, then serves: it never exits.

Its streams, its lease bucket and the scheduler's request consumer were asked for once: a request that timed out
ended the process with an unhandled error (exit 1). nats-server is paused with SIGSTOP: connected, and nothing
answers. A stream's leader is waited for 30 s before its info request gives up; the tests shorten that wait, so
an outage outlasting it fits their patience.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from nats.js import api

from schemas import Pending, ScheduleRequest
from schemas import subjects as s
from services.cli.mesh import Mesh
from services.client import Client
from services.runtime import replicas
from services.runtime.bus import Bus
from services.scheduler.app import main as scheduler_main
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


async def test_a_lease_bucket_and_a_request_consumer_asked_for_while_jetstream_does_not_answer_come_once_it_does(
    servers: Mesh,
) -> None:
    async with bus_of(servers, "scheduler") as bus:
        config = api.ConsumerConfig(durable_name=s.REQUESTS_CONSUMER, ack_policy=api.AckPolicy.EXPLICIT)
        asked = asyncio.gather(bus.lease_bucket(), bus.pull(s.REQUESTS_SUBJECTS, s.REQUESTS_STREAM, config))
        await paused(servers, OUTAGE_S)
        bucket, requests = await asyncio.wait_for(asked, timeout=3 * JETSTREAM_TIMEOUT_S)
        assert await bucket.create("holder", b"me") >= 1
        await bus.js.publish(f"{s.PREFIX}.req.test", b"a request")
        assert [msg.data for msg in await requests.fetch(1, timeout=5.0)] == [b"a request"]


async def test_a_scheduler_starting_while_jetstream_does_not_answer_comes_up_and_serves(
    servers: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scheduler (run in the test's process) connects, and nats-server pauses at once: its streams' declaration
    meets the outage."""
    connect, pausing = Bus.connect, asyncio.Event()
    async with contextlib.AsyncExitStack() as outage:

        async def connect_then_pause(settings: Any, name: str, *args: Any, **kwargs: Any) -> Bus:
            connected = await connect(settings, name, *args, **kwargs)
            if name == "scheduler":
                await outage.enter_async_context(nats_paused(servers))
                pausing.set()
            return connected

        monkeypatch.setattr(Bus, "connect", connect_then_pause)
        scheduler = asyncio.ensure_future(scheduler_main(settings_of(servers)))
        try:
            await asyncio.wait_for(pausing.wait(), timeout=10.0)
            await asyncio.sleep(OUTAGE_S)
            await outage.aclose()
            assert not scheduler.done()
            async with Client(servers.nats_url, timeout=10.0) as client:
                assert await holds_within(lambda: scheduler_answers(client), timeout=10.0)
                decision = await client.submit(ScheduleRequest("job", {"CPU": 1}), timeout=10.0)
            assert isinstance(decision, Pending)  # no nodes: decided, and waiting
            assert not scheduler.done()
        finally:
            await cancelled(scheduler)
