"""Bursts of requests: each is decided once and answered once its decision is in the log; one client connection
carries many durable requests at once, their replies all on one subscription."""

from __future__ import annotations

import asyncio

import pytest

from schemas import Pending, Placed, ScheduleRequest
from schemas import subjects as s
from services.client import Client
from services.core.errors import UnavailableError
from services.core.state import replay
from services.local.mesh import Mesh
from tests.integration.conftest import wait_ready
from tests.integration.log import read_events
from tests.integration.test_restart_and_snapshots import digest_of_a_replay_at

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

NODES = 10
CPUS = 8
BURST = 120


async def test_a_burst_from_many_clients_is_decided_once_each_within_capacity_and_replays_the_same(
    client: Client, mesh: Mesh
) -> None:
    """120 one-CPU actors at once on 80 CPUs: each answer is its own actor's, 80 placed and 40 pending, no node
    over its capacity, every placement answered is in the log, and a replay of the log gives the leader's view,
    before and after the scheduler restarts."""
    for index in range(NODES):
        await client.register_node(f"n{index}", {"CPU": CPUS})
    clients = [Client(mesh.nats_url, timeout=10.0) for _ in range(4)]
    for other in clients:
        await other.connect()
    try:
        answers = await asyncio.gather(
            *(clients[i % 4].submit(ScheduleRequest(f"a{i}", {"CPU": 1})) for i in range(BURST))
        )
    finally:
        for other in clients:
            await other.close()
    assert [answer.id for answer in answers] == [f"a{i}" for i in range(BURST)]
    placed = {answer.id: answer.node_id for answer in answers if isinstance(answer, Placed)}
    assert len(placed) == NODES * CPUS
    assert sum(isinstance(answer, Pending) for answer in answers) == BURST - NODES * CPUS
    for node in (await client.status()).nodes:
        assert node.available["CPU"] == 0
    in_log = replay(await read_events(mesh.nats_url))
    assert {actor_id: in_log.actors[actor_id].node_id for actor_id in placed} == placed
    live, replayed = await digest_of_a_replay_at(mesh, client, "scheduler")
    assert live == replayed
    mesh.stop_service("scheduler")
    mesh.start_service("scheduler")
    await wait_ready(client)
    assert (await client.placements()) == placed
    live, replayed = await digest_of_a_replay_at(mesh, client, "scheduler")
    assert live == replayed


async def test_a_client_connected_again_is_answered_on_its_new_connection(client: Client, mesh: Mesh) -> None:
    """Durable requests share one reply subscription per connection: closing and connecting again makes another."""
    await client.register_node("n1", {"CPU": 4})
    again = Client(mesh.nats_url, timeout=5.0)
    await again.connect()
    first = await again.submit(ScheduleRequest("a1", {"CPU": 1}))
    await again.close()
    await again.connect()
    try:
        second = await again.submit(ScheduleRequest("a2", {"CPU": 1}))
        removed = await again.remove_actor("a1")
    finally:
        await again.close()
    assert isinstance(first, Placed) and isinstance(second, Placed)
    assert "removed" in removed.message
    assert set(await client.placements()) == {"a2"}


async def test_a_request_no_stream_stores_is_sent_again_until_its_timeout_then_said_unavailable(
    client: Client, mesh: Mesh
) -> None:
    """With the requests stream gone (and no scheduler to declare it again) a durable request is sent again until its
    timeout (a stream between two leaders answers no more than a missing one), then fails with a clear
    `UnavailableError` naming the missing stream (not "no decision within" the timeout); the stream's acks are read
    on the client's own subscription."""
    mesh.stop_service("scheduler")
    await client.bus.js.delete_stream(s.REQUESTS_STREAM)
    missing = rf"no stream stores corral\.req\.schedule \(the requests stream {s.REQUESTS_STREAM} is missing"
    with pytest.raises(UnavailableError, match=missing):
        await client.submit(ScheduleRequest("a1", {"CPU": 1}), timeout=1.0)


async def test_a_request_sent_while_its_stream_is_gone_is_stored_once_the_stream_is_back(
    client: Client, mesh: Mesh
) -> None:
    """The requests stream deleted under a running scheduler: a request sent meanwhile is sent again until the
    scheduler has declared the stream again, then decided (it was told at once that the stream is missing)."""
    await client.register_node("n1", {"CPU": 2})
    await client.bus.js.delete_stream(s.REQUESTS_STREAM)
    decision = await client.submit(ScheduleRequest("a1", {"CPU": 1}), timeout=20.0)
    assert isinstance(decision, Placed) and decision.node_id == "n1"
