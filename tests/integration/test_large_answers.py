"""Large answers come whole, page by page under the bus's payload limit; an oversized request is refused clearly."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas import ScheduleRequest
from services.client import Client, RejectedError, TooLargeError
from services.local.mesh import Mesh, start_mesh
from services.runtime.codec import encode
from tests.integration.conftest import FAST, configured_servers, corral, log_of, start_test_mesh, wait_ready
from tests.support.servers import ServerPath

pytestmark = pytest.mark.anyio

ACTORS = 4_000
NODES = 20
IN_FLIGHT = 500
PAYLOAD_LIMIT = 131_072
"""The bus's payload limit where the actors are listed: their answer (about 0.5 MB) takes several pages."""


@pytest.fixture
def mesh(tmp_path: Path, server_path: ServerPath) -> Iterator[Mesh]:
    """The mesh, where a node is dead after a minute without heartbeats: the client that sends them is also what
    submits and reads thousands of actors, and under load its loop is busy longer than the usual 1.5 s."""
    running = start_test_mesh(tmp_path / "mesh", server_path, settings={"CORRAL_HEARTBEAT_TIMEOUT": "60"})
    try:
        yield running
    finally:
        running.close()


@pytest.fixture
def small_payload_mesh(tmp_path: Path) -> Iterator[Mesh]:
    """`mesh` on a local nats-server whose payload limit is `PAYLOAD_LIMIT` (a configuration file it reads)."""
    config = tmp_path / "nats.conf"
    config.write_text(f"max_payload: {PAYLOAD_LIMIT}\n")

    settings = {**FAST, "CORRAL_HEARTBEAT_TIMEOUT": "60"}
    running = start_mesh(tmp_path / "mesh", settings=settings, servers=configured_servers(config))
    try:
        yield running
    finally:
        running.close()


async def _submit_many(client: Client, count: int) -> None:
    """Submit `count` one-CPU actors with many requests in flight (the scheduler decides them in batches)."""
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(index: int) -> None:
        async with gate:
            await client.submit(ScheduleRequest(f"actor-{index:05d}", {"CPU": 1}, labels={"app": "bulk"}), timeout=30)

    await asyncio.gather(*(one(index) for index in range(count)))


def _deaths(mesh: Mesh) -> str:
    """The nodes the labels service declared dead: their actors die with them, so fewer are left to list."""
    return "\n".join(line for line in log_of(mesh, "labels").splitlines() if "missed heartbeats" in line)


async def test_thousands_of_actors_list_completely_through_the_client_and_the_cli_page_by_page(
    small_payload_mesh: Mesh,
) -> None:
    mesh = small_payload_mesh
    async with Client(mesh.nats_url, timeout=10.0) as client:
        await wait_ready(client)
        assert client.bus.nc.max_payload == PAYLOAD_LIMIT
        await list_completely(mesh, client)


async def list_completely(mesh: Mesh, client: Client) -> None:
    """Submit `ACTORS` actors on `NODES` nodes; every listing, through the client and `corral status`, has them all."""
    for index in range(NODES):
        await client.register_node(f"node-{index:02d}", {"CPU": ACTORS // NODES})
    await _submit_many(client, ACTORS)

    status = await client.status()
    assert len(status.actors) == ACTORS, _deaths(mesh)
    assert len(encode(status)) > 3 * PAYLOAD_LIMIT  # so it came in several pages
    assert {actor.status for actor in status.actors} == {"placed"}
    assert [actor.actor_id for actor in status.actors] == sorted(f"actor-{i:05d}" for i in range(ACTORS))
    assert len(status.nodes) == NODES
    assert len(await client.placements()) == ACTORS
    assert len(await client.actors({"app": "bulk"})) == ACTORS
    assert len((await client.status(limit=5)).actors) == 5

    shown = await corral(mesh, "status", "-o", "json", timeout=20)
    assert shown.returncode == 0, shown.stderr
    assert len(json.loads(shown.stdout)["actors"]) == ACTORS, _deaths(mesh)
    assert "maximum payload exceeded" not in log_of(mesh, "scheduler")
    assert not _deaths(mesh)


async def test_a_request_over_the_payload_limit_is_refused_naming_its_size_and_the_limit(
    mesh: Mesh, client: Client
) -> None:
    await client.register_node("n1", {"CPU": 4})
    huge = {f"key-{i:06d}": "v" * 40 for i in range(25_000)}  # about 1.3 MB of labels
    with pytest.raises(TooLargeError, match=r"the request is \d+ bytes, over the bus's payload limit of 1048576 bytes"):
        await client.submit(ScheduleRequest("huge", {"CPU": 1}, labels=huge))

    large = {f"key-{i:06d}": "v" * 40 for i in range(10_000)}  # about 0.5 MB: sent, and refused by the scheduler
    with pytest.raises(RejectedError, match=r"message of \d+ bytes is over the 262144-byte limit"):
        await client.submit(ScheduleRequest("large", {"CPU": 1}, labels=large))
    assert "large" not in await client.placements()

    request = mesh.data_dir / "huge.json"
    request.write_text(json.dumps({"actor_id": "huge", "resources": {"CPU": 1}, "labels": huge}))
    shown = await corral(mesh, "submit", "-f", str(request), timeout=20)
    assert shown.returncode == 1
    assert shown.stderr.count("\n") == 1, shown.stderr
    assert f"{request.stat().st_size} bytes" in shown.stderr  # refused as it is read, naming its size and the limit
    assert "1048576" in shown.stderr
