"""`corral vc ...`, `submit --vc`, `status --vc` and `why` inside a virtual cluster, against a real mesh."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.client import SyncClient
from services.local.mesh import Mesh
from tests.cli.test_commands import run

TWO_STRICT = (
    '{"fixed_size_nodes": [{"nodes": [{"resources": {"CPU": 1}}, {"resources": {"CPU": 1}}],'
    ' "scheduling_policy": "STRICT_SPREAD"}]}'
)


@pytest.fixture
def raylets(mesh: Mesh) -> Iterator[SyncClient]:
    """The proposal's walk-through cluster: `raylet1` and `raylet2`, 4 CPUs each, alive while the test runs."""
    with SyncClient(mesh.nats_url) as client:
        client.wait_ready()
        client.register_node("raylet1", {"CPU": 4})
        client.register_node("raylet2", {"CPU": 4})
        yield client


@pytest.mark.integration
def test_a_tenant_creates_a_cluster_runs_work_in_it_and_reads_why_the_third_task_waits(
    mesh: Mesh, raylets: SyncClient, capsys: pytest.CaptureFixture[str]
) -> None:
    created = run(["vc", "create", "vc1", "--spec", TWO_STRICT], mesh, capsys)
    assert created == "vc1 admitted: virtual nodes vc1-0, vc1-1\n"
    placed = {run(["submit", f"t{i}", "--vc", "vc1"], mesh, capsys).split()[-1] for i in range(2)}
    assert placed == {"vc1-0", "vc1-1"}
    waiting = run(["submit", "t3", "--vc", "vc1"], mesh, capsys)
    assert "0/2 nodes of virtual cluster vc1 are available: 2 node(s) Insufficient CPU" in waiting

    why = run(["why", "t3"], mesh, capsys).splitlines()
    assert why[0] == "Actor t3 is pending."
    assert any(line.startswith("Blocked by: virtual cluster vc1 has only its fixed-size nodes") for line in why)

    scoped = run(["status", "--vc", "vc1"], mesh, capsys).splitlines()
    assert scoped[0] == "NODES (2):"
    assert {line.split()[0] for line in scoped[2:4]} == {"vc1-0", "vc1-1"}
    assert "raylet1" not in " ".join(scoped[:4])

    listed = run(["vc", "list"], mesh, capsys).splitlines()
    assert listed[0].split() == ["CLUSTER", "STATE", "PRIORITY", "USED/TOTAL", "MAX", "VNODES"]
    assert listed[1].split() == ["vc1", "admitted", "0", "CPU", "2/2", "CPU", "2", "2"]

    shown = run(["vc", "show", "vc1"], mesh, capsys)
    assert "State:      admitted" in shown
    assert {"raylet1", "raylet2"} <= set(shown.split())
    info = json.loads(run(["vc", "show", "vc1", "-o", "json"], mesh, capsys))
    assert info["cluster_id"] == "vc1" and info["total_resources"] == {"CPU": 2.0}

    refused = run(["vc", "destroy", "vc1"], mesh, capsys, status=1)
    assert "still has live work (t0, t1, t3)" in refused
    assert run(["vc", "destroy", "vc1", "--force"], mesh, capsys) == "destroyed vc1; stopped t0, t1, t3\n"
    assert run(["vc", "list"], mesh, capsys) == "no virtual clusters\n"


@pytest.mark.integration
def test_a_nested_cluster_from_a_file_and_a_queued_one_with_its_position(
    mesh: Mesh, raylets: SyncClient, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run(["vc", "create", "job", "--spec", '{"flexible_resource_min": {"CPU": 6}}'], mesh, capsys)
    child = tmp_path / "etl.json"
    child.write_text('{"flexible_resource_min": {"CPU": 2}, "flexible_resource_max": {"CPU": 2}}')
    assert run(["vc", "create", "etl", "--parent", "job", "--spec", f"@{child}"], mesh, capsys).startswith(
        "etl admitted: virtual nodes etl-flex-"
    )
    queued = run(["vc", "create", "big", "--spec", '{"flexible_resource_min": {"CPU": 4}}'], mesh, capsys)
    assert queued.startswith("big queued (position 1): virtual cluster big waits in the admission queue of the root")
    tree = [line.split()[:2] for line in run(["vc", "list"], mesh, capsys).splitlines()[1:]]
    assert tree == [["job", "admitted"], ["etl", "admitted"], ["big", "queued"]]
    assert run(["vc", "list"], mesh, capsys).splitlines()[2].startswith("  etl")


@pytest.mark.integration
def test_bad_specs_and_unknown_clusters_exit_1_naming_the_problem(
    mesh: Mesh, raylets: SyncClient, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = run(["vc", "create", "x", "--spec", '{"flexible_resource_min": {"CPU": -1}}'], mesh, capsys, status=1)
    assert "flexible_resource_min['CPU']" in bad and "-1" in bad
    typo = run(["vc", "create", "x", "--spec", '{"flexible_resource_mim": {}}'], mesh, capsys, status=1)
    assert "--spec: not a VirtualCluster spec" in typo
    assert "no such virtual cluster" in run(["vc", "show", "nope"], mesh, capsys, status=1)
    assert "no such virtual cluster" in run(["submit", "a", "--vc", "nope"], mesh, capsys, status=1)
