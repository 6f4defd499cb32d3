"""Easy mistakes get clear answers: no bus, a live id resubmitted differently, a bad setting, impossible work."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schemas import PlacementGroupRequest, ScheduleRequest
from services.client import Client, ConflictError, SyncClient, UnavailableError
from services.local.mesh import Mesh
from services.local.servers import free_port
from tests.integration.conftest import corral

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


def _python(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


async def test_a_client_without_a_bus_fails_within_its_timeout_and_logs_it_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    caplog.set_level(logging.INFO, logger="corral.bus")  # an in-process CLI test may have quietened it
    started = time.monotonic()
    with pytest.raises(UnavailableError, match=f"no NATS server answered at {url} within 1.5s"):
        async with Client(url, timeout=1.5):
            pass
    assert time.monotonic() - started < 5
    failures = [record for record in caplog.records if url in record.getMessage()]
    assert len(failures) == 1, [record.getMessage() for record in caplog.records]


def test_a_sync_client_without_a_bus_fails_within_its_timeout() -> None:
    with pytest.raises(UnavailableError), SyncClient(f"nats://127.0.0.1:{free_port()}", timeout=1.0):
        pass


async def test_resubmitting_a_live_id_with_another_request_is_a_conflict_naming_both(
    mesh: Mesh, client: Client
) -> None:
    await client.register_node("gpu-1", {"CPU": 4}, {"tier": "gpu"})
    await client.register_node("web-1", {"CPU": 4}, {"tier": "web"})
    first = ScheduleRequest("a2", {"CPU": 1}, label_selector={"tier": "gpu"})
    placed = await client.submit(first)
    assert await client.submit(first) == placed

    with pytest.raises(ConflictError) as conflict:
        await client.submit(ScheduleRequest("a2", {"CPU": 3}, label_selector={"tier": "web"}))
    assert 'resources {"CPU":1.0} -> {"CPU":3.0}' in str(conflict.value)
    assert 'label_selector {"tier":"gpu"} -> {"tier":"web"}' in str(conflict.value)
    assert (await client.placements())["a2"] == "gpu-1"

    group = PlacementGroupRequest("pg", [{"CPU": 1}])
    await client.create_placement_group(group)
    with pytest.raises(ConflictError, match=r'bundles \[\{"CPU":1.0\}\] -> \[\{"CPU":2.0\}\]'):
        await client.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 2}]))

    cli = await corral(mesh, "submit", "a2", "--cpu", "3", "--selector", "tier=web")
    assert cli.returncode == 1
    assert cli.stderr.count("\n") == 1, cli.stderr
    assert "already live with another request" in cli.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["-m", "services.cli", "status"],
        ["-m", "services.cli", "up", "--data-dir", "{tmp}/corral", "--nats-port", "{port}"],
        ["-m", "services.scheduler"],
    ],
    ids=["corral status", "corral up", "python -m services.scheduler"],
)
def test_a_bad_setting_is_one_line_and_exit_2_in_every_entry_point(tmp_path: Path, command: list[str]) -> None:
    argv = [part.format(tmp=tmp_path, port=free_port()) for part in command]
    ran = _python(*argv, env={"PATH": "/usr/bin:/bin", "CORRAL_LEASE_TTL": "soon"})
    assert ran.returncode == 2
    assert ran.stderr.count("\n") == 1, ran.stderr
    assert "CORRAL_LEASE_TTL 'soon': must be a number (float)" in ran.stderr
    assert not (tmp_path / "corral").exists(), "nothing started"


async def test_work_no_node_could_ever_host_says_what_it_needs_and_what_the_largest_node_has(client: Client) -> None:
    await client.register_node("small", {"CPU": 8})
    await client.register_node("large", {"CPU": 16})
    decision = await client.submit(ScheduleRequest("huge", {"CPU": 64}))
    expected = "needs CPU 64; the largest node has 16"
    assert expected in getattr(decision, "message", "")
    assert "0/2 nodes are available: 2 node(s) Insufficient CPU." in getattr(decision, "message", "")
    assert any(expected in item.message for item in await client.pending())
