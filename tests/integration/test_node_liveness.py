"""Node liveness through the mesh: a node whose agent stops is unreachable at once (no new work, its actors stay),
declared dead after the grace (actors fail and restart elsewhere unless they tolerate `corral.io/unreachable`, for
their `toleration_seconds`), and a busy machine with a stalled labels service declares nobody dead."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas import NodeDeclaredDead, NodeDied, NodeUnreachable, Pending, Placed, ScheduleRequest
from services.client import Client
from services.core.labels import UNREACHABLE_TAINT
from services.local.mesh import Mesh
from tests.integration.conftest import corral, holds_within, start_test_mesh, wait_ready
from tests.integration.log import read_events
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

PATIENCE_S = 4.0
"""How long the patient actor tolerates its node declared dead."""


def actor(actor_id: str, seconds: float | None = None) -> ScheduleRequest:
    """1 CPU, restarting once; with `seconds`, tolerating a dead node that long."""
    if seconds is None:
        return ScheduleRequest(actor_id, {"CPU": 1}, max_restarts=1)
    return ScheduleRequest(
        actor_id,
        {"CPU": 1},
        max_restarts=1,
        tolerations={UNREACHABLE_TAINT: "exists()"},
        toleration_seconds={UNREACHABLE_TAINT: seconds},
    )


async def node_of(client: Client, actor_id: str) -> str | None:
    return (await client.placements()).get(actor_id)


async def test_a_silent_node_is_unreachable_then_dead_and_a_tolerating_actor_outlives_one_that_is_not(
    client: Client, mesh: Mesh
) -> None:
    async with Client(mesh.nats_url, timeout=10.0) as agent:
        await agent.register_node("victim", {"CPU": 4})
        for request in (actor("plain"), actor("patient", PATIENCE_S)):
            assert await client.submit(request) == Placed(request.actor_id, "victim")
        await client.register_node("stable", {"CPU": 4})
    # the agent is gone: no more heartbeats from `victim`

    async def unreachable() -> bool:
        nodes = {node.node_id: node for node in await client.nodes()}
        return any(taint.key == UNREACHABLE_TAINT for taint in nodes["victim"].taints)

    assert await holds_within(unreachable, timeout=10)
    refused = await client.submit(
        ScheduleRequest("newcomer", {"CPU": 1}, label_selector={"corral.io/node-id": "victim"})
    )
    assert isinstance(refused, Pending)
    assert any("were unreachable since" in reason for reason in refused.reasons), refused.reasons
    assert await node_of(client, "plain") == "victim"

    async def plain_moved() -> bool:
        return await node_of(client, "plain") == "stable"

    assert await holds_within(plain_moved, timeout=15)
    plain_moved_at = time.monotonic()
    assert await node_of(client, "patient") == "victim"

    async def patient_moved() -> bool:
        return await node_of(client, "patient") == "stable"

    assert await holds_within(patient_moved, timeout=PATIENCE_S + 15)
    assert time.monotonic() - plain_moved_at > PATIENCE_S * 0.75  # its toleration held it there meanwhile

    liveness = (NodeUnreachable, NodeDeclaredDead, NodeDied)
    said_of_victim = [e for e in await read_events(mesh.nats_url) if isinstance(e, liveness) and e.node_id == "victim"]
    assert [type(event) for event in said_of_victim] == [NodeUnreachable, NodeDeclaredDead, NodeDied]
    said = (await corral(mesh, "events", "--node", "victim")).stdout
    assert "unreachable since" in said, said
    assert "declared dead after" in said, said


async def test_an_agent_heard_again_before_the_grace_keeps_its_node_and_actors(
    tmp_path: Path, server_path: ServerPath
) -> None:
    mesh = start_test_mesh(tmp_path / "mesh", server_path, settings={"CORRAL_NODE_GRACE": "30"})
    try:
        async with Client(mesh.nats_url, timeout=10.0) as client:
            await wait_ready(client)
            agent = Client(mesh.nats_url, timeout=10.0)
            await agent.__aenter__()
            await agent.register_node("flaky", {"CPU": 4})
            assert await client.submit(actor("kept")) == Placed("kept", "flaky")
            await agent.__aexit__(None, None, None)

            async def tainted() -> bool:
                node = {node.node_id: node for node in await client.nodes()}["flaky"]
                return any(taint.key == UNREACHABLE_TAINT for taint in node.taints)

            assert await holds_within(tainted, timeout=10)
            async with Client(mesh.nats_url, timeout=10.0) as again:
                await again.register_node("flaky", {"CPU": 4})  # the agent restarts: a resuming registration

                async def untainted() -> bool:
                    return not await tainted()

                assert await holds_within(untainted, timeout=10)
                assert await client.placements() == {"kept": "flaky"}
    finally:
        mesh.close()


@contextlib.contextmanager
def busy_loops(count: int = 2) -> Iterator[None]:
    """`count` processes spinning a core each."""
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for process in spinning:
            process.kill()
            process.wait()


async def test_a_stalled_labels_service_on_a_busy_machine_declares_nobody_dead(
    tmp_path: Path, server_path: ServerPath
) -> None:
    mesh = start_test_mesh(tmp_path / "mesh", server_path, settings={"CORRAL_NODE_GRACE": "10"})
    try:
        async with Client(mesh.nats_url, timeout=10.0) as client:
            await wait_ready(client)
            for index in range(3):
                await client.register_node(f"n{index}", {"CPU": 4})
            for index in range(6):
                await client.submit(actor(f"a{index}"))
            before = await client.placements()
            labels = mesh.processes["labels"]
            with busy_loops():
                labels.send_signal(signal.SIGSTOP)
                await asyncio.sleep(3.0)  # the stall itself is the condition under test
                labels.send_signal(signal.SIGCONT)
                await wait_ready(client)
                settle_until = time.monotonic() + 4.0  # beyond the 1.5 s heartbeat timeout, within the grace
                while time.monotonic() < settle_until:
                    assert await client.placements() == before
                    await asyncio.sleep(0.2)
            deaths = [e for e in await read_events(mesh.nats_url) if isinstance(e, NodeDied | NodeDeclaredDead)]
            assert deaths == []
            assert await client.placements() == before
    finally:
        mesh.close()
