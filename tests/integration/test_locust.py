"""locust drives the mesh through loadtest/locustfile.py: requests are made, none fails, in one process or several."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from services.client import Client
from services.local.mesh import Mesh

pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.bench, pytest.mark.timeout(120)]

LOCUSTFILE = Path(__file__).resolve().parents[2] / "loadtest" / "locustfile.py"


def run_locust(mesh: Mesh, csv_prefix: Path, *extra: str) -> dict[str, dict[str, str]]:
    """locust headless for 5 s with 10 users against the mesh and 8 simulated nodes; its CSV rows by request name.
    Each user removes its oldest actor once it holds two. (The run's clock includes registering the nodes: 40 took
    9 s of a 10 s run beside two busy loops; 8 take well under a second.)"""
    command = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "-u", "10", "-r", "10", "-t", "5s",
        "-H", mesh.nats_url, "--csv", str(csv_prefix), "--corral-nodes", "8", "--corral-hold", "1",
        "--only-summary", *extra,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=90, check=False, env=mesh.env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with Path(f"{csv_prefix}_stats.csv").open() as stats:
        return {row["Name"]: row for row in csv.DictReader(stats)}


@pytest.mark.parametrize("processes", [1, 2], ids=["one process", "two worker processes"])
async def test_locust_users_make_requests_over_nats_and_none_fails(
    mesh: Mesh, client: Client, tmp_path: Path, processes: int
) -> None:
    """(`client`: the services answer before locust starts its clock.)"""
    extra = ("--processes", str(processes)) if processes > 1 else ()
    rows = run_locust(mesh, tmp_path / "locust", *extra)
    total = rows["Aggregated"]
    assert int(total["Request Count"]) > 0 and total["Type"] == ""
    assert int(total["Failure Count"]) == 0, rows
    assert {row["Type"] for name, row in rows.items() if name != "Aggregated"} == {"NATS"}
    assert any(name.startswith("schedule ") for name in rows) and "remove_actor" in rows
