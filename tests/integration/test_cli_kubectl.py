"""The kubectl-shaped CLI against a real mesh: get (every kind, format, selector, --vc, --watch), describe, label,
taint, cordon, uncordon, drain, create, delete, submit --wait and vc create --wait."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from schemas import ScheduleRequest, Taint
from services.cli.__main__ import main
from services.client import SyncClient
from services.local.mesh import Mesh
from tests.cli.test_commands import Lines, corral, run, stop
from tests.integration.conftest import LASTING_NODES, running_mesh
from tests.support.servers import ServerPath

GIB = 2**30


@pytest.fixture
def mesh(tmp_path: Path, server_path: ServerPath) -> Iterator[Mesh]:
    """A mesh of the test's own whose nodes outlive the late heartbeats of a busy machine (`LASTING_NODES`): nothing
    here is about liveness, and a node taken for unreachable would carry a taint the tests do not expect."""
    with running_mesh(tmp_path / "mesh", server_path, settings=LASTING_NODES) as running:
        yield running


@pytest.fixture
def nodes(mesh: Mesh) -> Iterator[SyncClient]:
    """`cpu-1` (4 CPUs, tier=web, z1, address 10.0.0.1), `gpu-1` (4 CPUs, 1 GPU, tier=ml, z2) and `mem-1` (2 CPUs,
    4Gi of memory, tier=db), alive while the test runs."""
    with SyncClient(mesh.nats_url, timeout=10.0) as client:
        client.wait_ready(timeout=15.0)
        client.register_node("cpu-1", {"CPU": 4}, {"tier": "web"}, zone="z1", address="10.0.0.1")
        client.register_node("gpu-1", {"CPU": 4, "GPU": 1}, {"tier": "ml"}, zone="z2")
        client.register_node("mem-1", {"CPU": 2, "memory": 4 * GIB}, {"tier": "db"}, zone="z1")
        yield client


def fails(argv: list[str], mesh: Mesh, capsys: pytest.CaptureFixture[str], status: int) -> str:
    """Run `corral argv` against the mesh, expecting exit `status` (2: a usage error); return stderr."""
    try:
        assert main([*argv, "--nats-url", mesh.nats_url]) == status
    except SystemExit as exited:
        assert exited.code == status
    return capsys.readouterr().err


def rows(text: str) -> list[list[str]]:
    """A table's lines split into cells (runs of two or more spaces), up to the first blank line."""
    table = text.split("\n\n", maxsplit=1)[0]
    return [re.split(r"\s{2,}", line.strip()) for line in table.splitlines()]


def column(text: str, name: str) -> dict[str, str]:
    """Row name -> the cell under header `name`."""
    header, *body = rows(text)
    return {row[0]: row[header.index(name)] for row in body}


@pytest.mark.integration
def test_get_lists_every_kind_with_aliases_formats_selectors_age_and_totals(
    mesh: Mesh, nodes: SyncClient, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["submit", "web", "--cpu", "1500m", "--labels", "app=web"], mesh, capsys) == "web placed on cpu-1\n"
    assert run(["submit", "trainer", "--resources", "GPU=2"], mesh, capsys).startswith("trainer pending: ")
    run(["create", "pg", "pg1", "--bundle", "CPU=1,memory=1Gi"], mesh, capsys)

    listed = run(["get", "nodes"], mesh, capsys)
    assert rows(listed)[0] == ["NAME", "STATUS", "ZONE", "CPU", "MEMORY", "ACTORS", "AGE"]
    assert rows(listed)[1][:6] == ["cpu-1", "Ready", "z1", "1.5/4", "-", "1"]
    assert rows(listed)[3][:6] == ["mem-1", "Ready", "z1", "1/2", "1Gi/4Gi", "0"]
    assert all(re.fullmatch(r"\d+s", age) for age in column(listed, "AGE").values())
    assert listed.split("\n\n")[1].splitlines() == [
        "Resources (used/total): CPU 2.5/10, GPU 0/1, memory 1Gi/4Gi",
        "Pending: 1 (1 Insufficient GPU)",
    ]
    for alias in ("no", "node", "NODES"):
        assert rows(run(["get", alias], mesh, capsys))[1][0] == "cpu-1"

    wide = run(["get", "nodes", "-o", "wide", "-l", "tier=ml"], mesh, capsys)
    assert rows(wide)[0][-4:] == ["ADDRESS", "RESOURCES", "LABELS", "TAINTS"]
    assert [row[0] for row in rows(wide)[1:]] == ["gpu-1"]
    assert rows(wide)[1][-3:] == ["GPU 0/1", "tier=ml", "<none>"]
    assert list(column(run(["get", "nodes", "-l", "tier=in(web,db)"], mesh, capsys), "AGE")) == ["cpu-1", "mem-1"]
    assert list(column(run(["get", "nodes", "--selector", "tier!=web"], mesh, capsys), "AGE")) == ["gpu-1", "mem-1"]
    assert main(["get", "nodes", "-l", "corral.io/availability-zone=z9", "--nats-url", mesh.nats_url]) == 0
    assert capsys.readouterr() == ("", "No resources found.\n")

    actors = json.loads(run(["get", "actors", "-o", "json"], mesh, capsys))
    assert {actor["actor_id"]: actor["status"] for actor in actors} == {"trainer": "pending", "web": "placed"}
    assert [
        a["actor_id"] for a in yaml.safe_load(run(["get", "actor", "-o", "yaml", "-l", "app=web"], mesh, capsys))
    ] == ["web"]
    assert column(run(["get", "actors", "-o", "wide"], mesh, capsys), "MESSAGE")["trainer"].startswith(
        "no node could ever host it"
    )

    pending = run(["get", "pending"], mesh, capsys)
    assert rows(pending)[1][:3] == ["trainer", "actor", "Insufficient GPU"]
    for alias in ("pgs", "pg", "placementgroups"):
        assert rows(run(["get", alias], mesh, capsys))[1][:3] == ["pg1", "placed", "1"]

    status = yaml.safe_load(run(["status", "-o", "yaml"], mesh, capsys))
    assert [item["id"] for item in status["pending"]] == ["trainer"]
    assert json.loads(run(["node", "list", "-o", "json"], mesh, capsys))[0]["node_id"] == "cpu-1"
    assert main(["status", "--json", "--nats-url", mesh.nats_url]) == 0  # retired: still works, with a notice
    retired = capsys.readouterr()
    assert json.loads(retired.out)["type"] == "status"
    assert "--json is deprecated and will be removed; use -o json" in retired.err


@pytest.mark.integration
def test_get_vcs_and_get_inside_a_virtual_cluster(
    mesh: Mesh, nodes: SyncClient, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["get", "vcs", "--nats-url", mesh.nats_url]) == 0
    assert capsys.readouterr() == ("", "No resources found.\n")
    spec = tmp_path / "team.yaml"
    spec.write_text("flexible_resource_min:\n  CPU: 1\nflexible_resource_max:\n  CPU: 2\n")
    assert run(["vc", "create", "team", "-f", str(spec)], mesh, capsys).startswith("team admitted: virtual nodes ")
    run(["submit", "job1", "--vc", "team", "--cpu", "500m"], mesh, capsys)

    for alias in ("vcs", "vc", "virtualclusters"):
        assert rows(run(["get", alias], mesh, capsys))[1][:5] == ["team", "admitted", "-", "0", "CPU 500m/1"]
    assert rows(run(["get", "vcs", "-o", "wide"], mesh, capsys))[1][-2:] == ["CPU 2", "-"]
    scoped = run(["get", "nodes", "--vc", "team"], mesh, capsys)
    assert [row[0].startswith("team-flex-") for row in rows(scoped)[1:]] == [True]
    assert re.fullmatch(r"\d+s", column(scoped, "AGE").popitem()[1])  # a virtual node's age is its cluster's
    assert list(column(run(["get", "actors", "--vc", "team"], mesh, capsys), "AGE")) == ["job1"]
    assert "no such virtual cluster" in fails(["get", "vcs", "--vc", "nope"], mesh, capsys, status=1)
    assert json.loads(run(["vc", "show", "team", "-o", "json"], mesh, capsys))["cluster_id"] == "team"


@pytest.mark.integration
def test_get_watch_prints_rows_as_events_in_the_log_change_them(mesh: Mesh, nodes: SyncClient) -> None:
    watch = corral("get", "actors", "-w", "--nats-url", mesh.nats_url)
    try:
        lines = Lines(watch)  # no actor yet: the header comes with the first row
        nodes.submit(ScheduleRequest("w1", {"CPU": 1}))
        assert lines.wait_for("NAME").split() == ["NAME", "STATUS", "NODE", "RESTARTS", "AGE"]
        assert lines.wait_for("w1").split()[:3] == ["w1", "placed", "cpu-1"]
        nodes.submit(ScheduleRequest("w2", {"GPU": 5}))
        assert lines.wait_for("w2").split()[:3] == ["w2", "pending", "-"]
        nodes.remove_actor("w1")
        assert lines.wait_for("w1").split()[:2] == ["w1", "<deleted>"]
    finally:
        status, err = stop(watch, signal.SIGINT)
    assert status == 0, err


@pytest.mark.integration
def test_describe_shows_everything_known_and_the_explanation_of_pending_work(
    mesh: Mesh, nodes: SyncClient, capsys: pytest.CaptureFixture[str]
) -> None:
    run(["submit", "web", "--cpu", "1500m", "--labels", "app=web", "--max-restarts", "2"], mesh, capsys)
    run(["submit", "trainer", "--resources", "GPU=2", "--tolerate", "gpu", "--selector", "tier=ml"], mesh, capsys)
    run(["taint", "node", "cpu-1", "maint=soon:PreferNoSchedule"], mesh, capsys)
    run(["create", "pg", "pg1", "--bundle", "CPU=1", "--bundle", "CPU=1", "--strategy", "STRICT_SPREAD"], mesh, capsys)

    node = run(["describe", "node", "cpu-1"], mesh, capsys).splitlines()
    assert node[0].split() == ["Name:", "cpu-1"]
    assert "tier=web (agent)" in " ".join(node) and "corral.io/availability-zone=z1 (agent)" in " ".join(node)
    assert any(line.split() == ["Taints:", "maint=soon:PreferNoSchedule", "(operator)"] for line in node)
    assert "Allocated resources:" in node
    assert ["CPU", "1.5", "(38%)", "4"] in [line.split() for line in node]
    assert ["web", "default", "0"] in [line.split() for line in node]

    waiting = run(["describe", "actor", "trainer"], mesh, capsys).splitlines()
    assert waiting[0].split() == ["Name:", "trainer"]
    assert ["Requests:", "CPU=1,GPU=2"] in [line.split() for line in waiting]
    assert ["Node-Selectors:", "tier=ml"] in [line.split() for line in waiting]
    assert waiting[waiting.index("Explanation:") + 1].strip() == "Actor trainer is pending."
    explanation = waiting[waiting.index("Explanation:") :]
    assert explanation[2].strip().startswith("Message: ") and explanation[3].strip() == "Reasons:"
    reasons = waiting[waiting.index("Explanation:") : waiting.index("History:")]
    assert reasons[-1].split()[-1] in ("cpu-1", "gpu-1", "mem-1")  # the explanation ends with its reasons table
    assert waiting[waiting.index("History:") + 1].split()[1:] == ["submitted"]
    assert "pending: " in waiting[-1]  # the history ends with the wait
    placed = run(["describe", "actor", "web"], mesh, capsys).splitlines()
    assert ["Max", "restarts:", "2"] in [line.split() for line in placed]
    assert placed[placed.index("History:") - 1].strip() == "Actor web runs on node cpu-1."
    assert placed[-1].split()[1:] == ["submitted", "and", "placed", "on", "cpu-1"]

    group = run(["describe", "pg", "pg1"], mesh, capsys).splitlines()
    assert ["Strategy:", "STRICT_SPREAD"] in [line.split() for line in group]
    bundles = [line.split() for line in group[group.index("Bundles:") + 2 : group.index("Explanation:")]]
    assert [bundle[:2] for bundle in bundles] == [["0", "CPU=1"], ["1", "CPU=1"]]
    assert len({bundle[2] for bundle in bundles}) == 2  # STRICT_SPREAD: two nodes
    assert group[-1].strip().startswith("Placement group pg1 is placed: bundle 0 on ")

    run(["vc", "create", "team", "--spec", '{"flexible_resource_min": {"CPU": 1}}'], mesh, capsys)
    cluster = run(["describe", "vc", "team"], mesh, capsys)
    assert "State:      admitted" in cluster and "Created:" in cluster

    assert "actor 'ghost': no such actor" in fails(["describe", "actor", "ghost"], mesh, capsys, status=1)
    assert "node 'ghost': no such live node" in fails(["describe", "node", "ghost"], mesh, capsys, status=1)


@pytest.mark.integration
def test_label_and_taint_edit_single_keys_as_kubectl_does(
    mesh: Mesh, nodes: SyncClient, capsys: pytest.CaptureFixture[str]
) -> None:
    def user_labels() -> dict[str, str]:
        (node,) = [n for n in nodes.nodes() if n.node_id == "cpu-1"]
        return {k: v for k, v in node.labels.items() if not k.startswith("corral.io/")}

    assert run(["label", "node", "cpu-1", "team=infra"], mesh, capsys) == "node/cpu-1 labeled\n"
    assert user_labels() == {"tier": "web", "team": "infra"}
    err = fails(["label", "node", "cpu-1", "tier=batch", "rack=r1"], mesh, capsys, status=1)
    assert "label 'tier' already has a value ('web'): overwrite (--overwrite) to change it to 'batch'" in err
    assert user_labels() == {"tier": "web", "team": "infra"}  # refused: nothing changed
    run(["label", "node", "cpu-1", "tier=batch", "team-", "--overwrite"], mesh, capsys)
    assert user_labels() == {"tier": "batch"}
    run(["label", "node", "cpu-1", "only=this", "--replace"], mesh, capsys)
    assert user_labels() == {"only": "this"}
    assert main(["label", "--node-id", "cpu-1", "a=b", "--nats-url", mesh.nats_url]) == 0  # retired: replaces all
    retired = capsys.readouterr()
    assert retired.out == "node cpu-1 labelled a=b\n"
    assert "`corral label --node-id ID K=V` is deprecated" in retired.err
    assert user_labels() == {"a": "b"}

    def taints() -> list[Taint]:
        found: list[Taint] = nodes.taints("gpu-1").get("gpu-1", [])
        return found

    run(["taint", "node", "gpu-1", "gpu=true:NoSchedule", "gpu=true:PreferNoSchedule"], mesh, capsys)
    assert taints() == [Taint("gpu", "true", "NoSchedule"), Taint("gpu", "true", "PreferNoSchedule")]
    assert run(["taint", "node", "gpu-1", "gpu:NoSchedule-"], mesh, capsys) == "node/gpu-1 untainted\n"
    assert taints() == [Taint("gpu", "true", "PreferNoSchedule")]
    err = fails(["taint", "node", "gpu-1", "gpu:NoExecute-"], mesh, capsys, status=1)
    assert "Error from server (NotFound): taint gpu:NoExecute not found on node gpu-1" in err
    run(["taint", "node", "gpu-1", "gpu-"], mesh, capsys)
    assert taints() == []
    run(["taint", "node", "10.0.0.1", "maint:NoExecute", "--by-address"], mesh, capsys)
    assert nodes.taints("cpu-1") == {"cpu-1": [Taint("maint", "", "NoExecute")]}
    assert main(["taint", "--node-address", "10.0.0.1", "--delete", "maint", "--nats-url", mesh.nats_url]) == 0
    retired = capsys.readouterr()
    assert retired.out == "node at 10.0.0.1 untainted maint\n"
    assert "`corral taint --node-id|--node-address --append|--delete` is deprecated" in retired.err
    assert nodes.taints("cpu-1").get("cpu-1", []) == []


@pytest.mark.integration
def test_cordon_uncordon_and_drain_which_waits_for_the_node_to_empty_or_times_out(
    mesh: Mesh, nodes: SyncClient, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["cordon", "cpu-1"], mesh, capsys) == "node/cpu-1 cordoned\n"
    assert column(run(["get", "nodes"], mesh, capsys), "STATUS")["cpu-1"] == "Ready,SchedulingDisabled"
    assert run(["submit", "a1", "--selector", "tier=web"], mesh, capsys).startswith("a1 pending: ")
    assert run(["uncordon", "cpu-1"], mesh, capsys) == "node/cpu-1 uncordoned\n"
    assert nodes.wait_placed("a1", timeout=10.0).node_id == "cpu-1"

    run(["submit", "a2", "--selector", "tier=web", "--max-restarts", "1"], mesh, capsys)
    run(["delete", "actor", "a1"], mesh, capsys)
    assert run(["get", "nodes"], mesh, capsys)
    drained = run(["drain", "cpu-1", "--timeout", "20"], mesh, capsys).splitlines()
    assert drained[0] == "node/cpu-1 tainted corral.io/drain:NoExecute"
    assert drained[-1] == "node/cpu-1 drained"
    assert column(run(["get", "nodes"], mesh, capsys), "STATUS")["cpu-1"] == "Ready,SchedulingDisabled,Draining"
    assert column(run(["get", "actors"], mesh, capsys), "NODE")["a2"] == "-"  # evicted: only cpu-1 is tier=web

    run(["submit", "stubborn", "--resources", "GPU=1", "--tolerate", "corral.io/drain"], mesh, capsys)
    err = fails(["drain", "gpu-1", "--timeout", "1"], mesh, capsys, status=1)
    assert "node gpu-1 still holds work after 1s: 1 actor(s)" in err
    assert run(["uncordon", "cpu-1"], mesh, capsys) == "node/cpu-1 uncordoned\n"
    assert nodes.taints("cpu-1").get("cpu-1", []) == []


@pytest.mark.integration
def test_create_and_delete_placement_groups_and_actors(
    mesh: Mesh, nodes: SyncClient, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    manifest = tmp_path / "pg.yaml"
    manifest.write_text("pg_id: gang\nbundles:\n  - {CPU: 1}\n  - {CPU: 1}\nstrategy: STRICT_SPREAD\n")
    assert run(["create", "pg", "-f", str(manifest)], mesh, capsys).startswith("gang placed: bundle 0 on ")
    assert run(["create", "pg", "big", "--bundle", "GPU=4"], mesh, capsys).startswith("big pending: ")
    waiting = run(["describe", "pg", "big"], mesh, capsys).splitlines()
    assert ["Status:", "pending"] in [line.split() for line in waiting]
    assert waiting[waiting.index("Explanation:") + 1].strip() == "Placement group big is pending."
    err = fails(["create", "pg", "big2", "--bundle", "GPU=4", "--wait", "--timeout", "1"], mesh, capsys, status=1)
    assert "placement group big2 still waits after 1s: big2 pending: " in err
    assert run(["delete", "pg", "big"], mesh, capsys).startswith("pg/big deleted")
    run(["delete", "pg", "big2"], mesh, capsys)
    assert list(column(run(["get", "pgs"], mesh, capsys), "AGE")) == ["gang"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("pg_id: x\nbundles: lots\n")
    assert f"-f {bad}: not a PlacementGroupRequest" in fails(["create", "pg", "-f", str(bad)], mesh, capsys, 1)

    run(["submit", "a1"], mesh, capsys)
    assert run(["delete", "actor", "a1"], mesh, capsys).startswith("actor/a1 deleted")
    assert 'actors "a1" not found' in fails(["delete", "actor", "a1"], mesh, capsys, status=1)


@pytest.mark.integration
def test_submit_and_vc_create_wait_print_progress_until_placed_or_admitted(
    mesh: Mesh, nodes: SyncClient, capsys: pytest.CaptureFixture[str]
) -> None:
    run(["submit", "hog", "--resources", "GPU=1"], mesh, capsys)
    waiting = corral("submit", "next", "--resources", "GPU=1", "--wait", "--timeout", "30", "--nats-url", mesh.nats_url)
    lines = Lines(waiting)
    assert "0/3 nodes are available: 3 node(s) Insufficient GPU." in lines.wait_for("next pending: ")
    nodes.remove_actor("hog")
    assert lines.wait_for("next placed") == "next placed on gpu-1\n"
    assert waiting.wait(timeout=20) == 0

    err = fails(["submit", "never", "--resources", "GPU=9", "--wait", "--timeout", "1"], mesh, capsys, status=1)
    assert "actor never still waits after 1s: never pending: no node could ever host it" in err

    run(["vc", "create", "all", "--spec", '{"flexible_resource_min": {"CPU": 9}}'], mesh, capsys)
    queued = corral(
        "vc", "create", "late", "--spec", '{"flexible_resource_min": {"CPU": 2}}', "--wait", "--timeout", "30",
        "--nats-url", mesh.nats_url,
    )  # fmt: skip
    lines = Lines(queued)
    assert lines.wait_for("late queued").startswith("late queued (position 1): ")
    run(["vc", "destroy", "all", "--force"], mesh, capsys)
    assert lines.wait_for("late admitted").startswith("late admitted: virtual nodes late-flex-")
    assert queued.wait(timeout=20) == 0
