"""A view starts while JetStream does not answer (a nats-server restarting, say): it waits, then folds the log.

Its log identity and its log reader's consumer were asked for once: a request that timed out ended the service
with an unhandled error (exit 1), at start-up or when it read the log again after a reconnect (a chaos run's
scheduler did). nats-server is paused with SIGSTOP: connected, and nothing answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator

import pytest

from schemas import NodeRegistered
from services.local.mesh import Mesh
from services.runtime.bus import Bus
from services.runtime.follower import LogFollower
from services.runtime.snapshots import SnapshotStore
from services.runtime.views import FoldedView
from tests.integration.conftest import JETSTREAM_TIMEOUT_S, bus_of, paused

pytestmark = pytest.mark.anyio

REGISTERED = NodeRegistered(node_id="n1", resources={"CPU": 1.0}, labels={}, event_id="e1")


@pytest.fixture
async def bus(servers: Mesh) -> AsyncIterator[Bus]:
    """A bus to the servers' NATS, its log holding one event."""
    async with bus_of(servers, "reader") as connected:
        await connected.ensure_streams()
        assert await connected.append([REGISTERED]) == [1]
        yield connected


async def test_the_log_reader_waits_while_jetstream_does_not_answer_then_reads_the_log(servers: Mesh, bus: Bus) -> None:
    reader = bus.read_log(1)
    assert isinstance(reader, AsyncGenerator)
    first = asyncio.ensure_future(anext(reader))
    await paused(servers, JETSTREAM_TIMEOUT_S + 1)
    entry = await asyncio.wait_for(first, timeout=3 * JETSTREAM_TIMEOUT_S)
    assert (entry.sequence, entry.event) == (1, REGISTERED)
    await reader.aclose()


async def test_a_view_starting_while_jetstream_does_not_answer_folds_the_log_once_it_does(
    servers: Mesh, bus: Bus
) -> None:
    view = FoldedView()
    store = SnapshotStore(servers.env["CORRAL_REDIS_URL"])
    follower = LogFollower(bus, store, "reader", view.fold, view.dump, view.load, snapshot_every=1000)
    starting = asyncio.ensure_future(follower.start())
    await paused(servers, 2 * JETSTREAM_TIMEOUT_S + 1)  # the dead letters' lookup gives up, then the log's identity
    await asyncio.wait_for(starting, timeout=3 * JETSTREAM_TIMEOUT_S)
    assert follower.sequence == 1
    assert list(view.cluster.nodes) == ["n1"]
    await follower.close()
    await store.close()
