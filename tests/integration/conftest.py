"""Fixtures: a mesh per test (nats-server, redis-server, the services) and a connected client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from services.cli.mesh import Mesh, start_mesh
from services.client import Client

FAST = {
    "CORRAL_LEASE_TTL": "1.5",
    "CORRAL_REQUEST_ACK_WAIT": "2",
    "CORRAL_HEARTBEAT_INTERVAL": "0.2",
    "CORRAL_HEARTBEAT_TIMEOUT": "1.5",
    "CORRAL_LOG_LEVEL": "INFO",
}
"""Short timeouts so failover and node death happen within a test's patience."""


@pytest.fixture
def anyio_backend() -> str:
    """nats-py speaks asyncio only."""
    return "asyncio"


@pytest.fixture
def mesh(tmp_path: Path) -> Iterator[Mesh]:
    """nats-server and redis-server on free ports, and the labels, taints and scheduler processes."""
    running = start_mesh(tmp_path / "mesh", settings=FAST)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
async def client(mesh: Mesh) -> AsyncIterator[Client]:
    """A client of the mesh, once every service answers."""
    async with Client(mesh.nats_url, timeout=10.0) as connected:
        await wait_ready(connected)
        yield connected


async def wait_ready(client: Client) -> None:
    """Wait until labels, taints and the scheduler answer queries (after a start or a restart)."""
    await client.wait_ready(timeout=15.0)


def log_of(mesh: Mesh, key: str) -> str:
    """What a service process wrote to its log so far."""
    return (mesh.data_dir / f"{key}.log").read_text()
