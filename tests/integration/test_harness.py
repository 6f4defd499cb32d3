"""The harness keeps a test's nodes alive: the client that registered them heartbeats while the test runs the CLI."""

from __future__ import annotations

import pytest

from schemas import ScheduleRequest
from services.client import Client
from services.local.mesh import Mesh
from tests.integration.conftest import FAST, corral, log_of

pytestmark = pytest.mark.anyio


async def test_a_node_outlives_a_cli_run_longer_than_the_heartbeat_timeout(mesh: Mesh, client: Client) -> None:
    await client.register_node("n1", {"CPU": 1})
    await client.submit(ScheduleRequest("a1", {"CPU": 1}))
    timeout = 2 * float(FAST["CORRAL_HEARTBEAT_TIMEOUT"])
    waited = await corral(mesh, "submit", "a2", "--cpu", "1", "--wait", timeout=timeout)  # n1 is full: a2 waits
    assert waited.returncode != 0, waited.stdout
    assert "a2" in waited.stderr
    assert await client.placements() == {"a1": "n1"}
    assert "missed heartbeats" not in log_of(mesh, "labels")
