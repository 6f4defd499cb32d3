"""The log a running mesh follows is lost or replaced: the JetStream store wiped under it, or the event stream
deleted by an operator. Every service notices, exits with `EXIT_LOG_REPLACED` and is started again by the
supervisor (`Mesh.revive`, as `corral up` does); the mesh then serves from the new log only: no phantom node, new
work placed only on nodes registered in the new log, node agents registered again, every view equal to a replay.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time

import nats
import pytest

from schemas import Placed, ScheduleRequest
from schemas import subjects as s
from services.client import Client, CorralError
from services.local.mesh import SERVICES, Mesh
from services.runtime.runner import EXIT_LOG_REPLACED
from tests.integration.conftest import holds_within, log_of
from tests.integration.test_restart_and_snapshots import digest_of_a_replay_at
from tests.support.servers import ContainerServer

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

PATIENCE = 40.0
"""Seconds the mesh may take to notice, exit, be restarted and serve again."""


async def wipe_store_while_running(mesh: Mesh) -> None:
    """nats-server stopped, its JetStream store deleted, started again empty; the services keep running."""
    if isinstance(mesh.nats, ContainerServer):  # the store lives inside the container: delete every stream
        await delete_streams(mesh, (s.EVENTS_STREAM, s.REQUESTS_STREAM, s.DEAD_LETTERS_STREAM))
        return
    mesh.nats.stop()
    shutil.rmtree(mesh.data_dir / "nats" / "jetstream")
    mesh.nats.start()


async def delete_streams(mesh: Mesh, streams: tuple[str, ...]) -> None:
    """What `nats stream rm` does."""
    connection = await nats.connect(mesh.nats_url)
    try:
        for stream in streams:
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await connection.jetstream().delete_stream(stream)
    finally:
        await connection.close()


PROBE = "probe-"
"""The prefix of the actors `revived_and_serving` submits to learn that the mesh serves."""


async def revived_and_serving(mesh: Mesh, client: Client) -> None:
    """Restart what exits with a restartable code (the supervisor's job) until the new log's node is placeable."""
    deadline = time.monotonic() + PATIENCE
    while True:
        mesh.revive()
        with contextlib.suppress(CorralError, TimeoutError):
            decision = await client.submit(ScheduleRequest(f"{PROBE}{time.monotonic_ns()}", {"CPU": 0}), timeout=2.0)
            if isinstance(decision, Placed) and decision.node_id == "agent":
                await client.remove_actor(decision.id)
                return
        assert time.monotonic() < deadline, f"the mesh did not serve the new log within {PATIENCE}s"
        await asyncio.sleep(0.25)


async def check_served_from_the_new_log_only(mesh: Mesh, client: Client) -> None:
    """Only the re-registered agent's node exists; new work lands there; every view equals a replay."""
    assert [node.node_id for node in await client.nodes()] == ["agent"]
    for index in range(3):
        decision = await client.submit(ScheduleRequest(f"new{index}", {"CPU": 1}))
        assert isinstance(decision, Placed) and decision.node_id == "agent", decision
    assert set((await client.placements()).values()) == {"agent"}
    for name in ("scheduler", "labels"):
        live, replayed = await digest_of_a_replay_at(mesh, client, name)
        assert live == replayed, name
    for name in SERVICES:  # each notices on its own: a service that serves nothing the probe asks may notice last

        async def said(name: str = name) -> bool:
            return "the event log" in log_of(mesh, name)

        assert await holds_within(said, PATIENCE), f"{name} never said its log was gone or replaced"


async def old_cluster(mesh: Mesh, client: Client) -> None:
    """A heartbeating node agent, a node whose agent is gone (the phantom to be), and work on both."""
    await client.register_node("agent", {"CPU": 4})
    async with Client(mesh.nats_url, timeout=10.0) as gone:
        await gone.register_node("phantom", {"CPU": 64}, heartbeat=False)
    for index in range(4):
        await client.submit(ScheduleRequest(f"old{index}", {"CPU": 1}))


async def test_a_store_wiped_under_the_running_mesh_is_noticed_and_served_anew(mesh: Mesh) -> None:
    """nats-server restarted empty: services exit with EXIT_LOG_REPLACED, are revived, the agent re-registers."""
    async with Client(mesh.nats_url, timeout=10.0) as client:
        await client.wait_ready(timeout=15.0)
        await old_cluster(mesh, client)
        await wipe_store_while_running(mesh)
        await revived_and_serving(mesh, client)
        await check_served_from_the_new_log_only(mesh, client)
    assert f"exited with code {EXIT_LOG_REPLACED}" in "\n".join(mesh.revived)


async def test_an_event_stream_deleted_by_an_operator_is_noticed_and_served_anew(mesh: Mesh) -> None:
    """`nats stream rm CORRAL_EVENTS` under the running mesh: the same, with no NATS reconnect to prompt anyone."""
    async with Client(mesh.nats_url, timeout=10.0) as client:
        await client.wait_ready(timeout=15.0)
        await old_cluster(mesh, client)
        await delete_streams(mesh, (s.EVENTS_STREAM,))
        with contextlib.suppress(CorralError):  # decided on the lost log's view: never answered as placed
            decision = await client.submit(ScheduleRequest("during", {"CPU": 1}), timeout=3.0)
            assert not (isinstance(decision, Placed) and decision.node_id == "phantom"), decision
        await revived_and_serving(mesh, client)
        await check_served_from_the_new_log_only(mesh, client)


async def test_the_requests_stream_and_consumer_deleted_are_declared_again(mesh: Mesh) -> None:
    """The work queue or its durable consumer deleted by an operator: the scheduler declares them again in place."""
    async with Client(mesh.nats_url, timeout=10.0) as client:
        await client.wait_ready(timeout=15.0)
        await client.register_node("agent", {"CPU": 4})
        connection = await nats.connect(mesh.nats_url)
        try:
            await connection.jetstream().delete_consumer(s.REQUESTS_STREAM, s.REQUESTS_CONSUMER)
        finally:
            await connection.close()
        await revived_and_serving(mesh, client)
        await delete_streams(mesh, (s.REQUESTS_STREAM,))
        await revived_and_serving(mesh, client)
        assert mesh.revived == []  # nothing had to restart


async def test_the_lease_bucket_deleted_is_made_again_with_epochs_above_the_logs(mesh: Mesh) -> None:
    """`nats kv rm corral_leases` under the leader: it declares the bucket again and keeps leading; a scheduler that
    wins the lease in the new bucket leads with an epoch above the log's (its decisions count in every view)."""
    async with Client(mesh.nats_url, timeout=10.0) as client:
        await client.wait_ready(timeout=15.0)
        await client.register_node("agent", {"CPU": 8})
        await client.submit(ScheduleRequest("before", {"CPU": 1}))
        await delete_streams(mesh, (f"KV_{s.LEASE_BUCKET}",))
        connection = await nats.connect(mesh.nats_url)
        try:
            deadline = time.monotonic() + PATIENCE
            while True:
                with contextlib.suppress(nats.js.errors.BucketNotFoundError):
                    await connection.jetstream().key_value(s.LEASE_BUCKET)
                    break
                assert time.monotonic() < deadline, "the lease bucket was not declared again"
                await asyncio.sleep(0.25)
        finally:
            await connection.close()
        mesh.stop_service("scheduler")
        mesh.start_service("scheduler")
        await revived_and_serving(mesh, client)
        decision = await client.submit(ScheduleRequest("after", {"CPU": 1}))
        assert isinstance(decision, Placed) and decision.node_id == "agent", decision
        placed = {actor for actor in await client.placements() if not actor.startswith(PROBE)}
        assert placed == {"before", "after"}  # a probe that timed out may still be placed: it is durable
        live, replayed = await digest_of_a_replay_at(mesh, client, "scheduler")
        assert live == replayed
