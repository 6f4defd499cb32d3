"""A view's log reader starts while JetStream does not answer (a nats-server restarting, say): it waits, then reads.

Its consumer was made once: a request that timed out ended the service with an unhandled error (exit 1), at
start-up or when it read the log again after a reconnect (seen in a chaos run).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncGenerator

import pytest

from schemas import NodeRegistered
from services.cli.mesh import Mesh
from services.runtime.bus import Bus
from services.runtime.settings import Settings

pytestmark = pytest.mark.anyio

JETSTREAM_TIMEOUT_S = 5.0
"""How long the bus waits for a JetStream answer (`Bus.js`): the outage outlasts it."""


async def test_the_log_reader_waits_while_jetstream_does_not_answer_then_reads_the_log(servers: Mesh) -> None:
    nats_server = servers.nats.process
    if nats_server is None:
        pytest.skip("the NATS server is not a local process here (it is paused with SIGSTOP)")
    settings = Settings(**{**Settings.from_env().__dict__, "nats_url": servers.nats_url})
    bus = await Bus.connect(settings, "reader")
    try:
        await bus.ensure_streams()
        (appended,) = await bus.append([NodeRegistered(node_id="n1", resources={"CPU": 1.0}, labels={}, event_id="e1")])
        reader = bus.read_log(1)
        assert isinstance(reader, AsyncGenerator)
        nats_server.send_signal(signal.SIGSTOP)  # connected, and nothing answers
        try:
            first = asyncio.ensure_future(anext(reader))
            await asyncio.sleep(JETSTREAM_TIMEOUT_S + 1)  # the outage lasts longer than one request may wait
        finally:
            nats_server.send_signal(signal.SIGCONT)
        entry = await asyncio.wait_for(first, timeout=3 * JETSTREAM_TIMEOUT_S)
        assert (entry.sequence, entry.event) == (appended, NodeRegistered("n1", {"CPU": 1.0}, {}, event_id="e1"))
        await reader.aclose()
    finally:
        await bus.close()
