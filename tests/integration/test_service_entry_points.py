"""Each service runs as `python -m services.NAME`, as a deployment starts it (the test meshes and `corral up` fork
theirs from a preloaded parent instead)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from schemas import Placed, ScheduleRequest
from services import CORE_BUILD
from services.client import Client
from services.local.mesh import SERVICES, start_mesh
from tests.integration.conftest import FAST, wait_ready

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_services_started_with_python_dash_m_place_an_actor(tmp_path: Path) -> None:
    mesh = start_mesh(tmp_path / "mesh", settings=FAST, preloaded=False)
    try:
        assert all(isinstance(process, subprocess.Popen) for process in mesh.processes.values())
        assert sorted(mesh.processes) == sorted(SERVICES)
        async with Client(mesh.nats_url, timeout=10.0) as client:
            await wait_ready(client)
            await client.register_node("n1", {"CPU": 2}, heartbeat=False)
            decision = await client.submit(ScheduleRequest("a1", {"CPU": 1}))
        assert isinstance(decision, Placed) and decision.node_id == "n1"
        for name in SERVICES:  # each says which build of the core it runs: the one this suite's CORRAL_CORE asks for
            assert f"{name}: serving (the core's {CORE_BUILD} build)" in (mesh.data_dir / f"{name}.log").read_text()
    finally:
        mesh.close()
