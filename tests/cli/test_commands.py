"""The mesh commands of `corral`: what a user types, what they read back, and the exit status they get."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import httpx
import pytest

from schemas import ActorFailed, ActorPlaced, ActorRemoved, Exists, Pending, Placed, Taint
from services.cli import args as types
from services.cli.__main__ import build_parser, main
from services.cli.commands.node import ActorWatch
from services.cli.commands.ops import build_request, build_requests
from services.cli.commands.sim import sim_nodes
from services.cli.commands.status import render_why
from services.cli.common import chosen
from services.client import SyncClient
from services.local.mesh import Mesh, start_mesh
from services.local.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
FAST = {"CORRAL_HEARTBEAT_INTERVAL": "0.2", "CORRAL_HEARTBEAT_TIMEOUT": "1.5", "CORRAL_NODE_GRACE": "1.0"}
"""Short heartbeats and grace, so a stopped node agent's node is unreachable, then dead, within a test's patience."""
LASTING = {"CORRAL_HEARTBEAT_TIMEOUT": "30", "CORRAL_NODE_GRACE": "30"}
"""Over FAST, for the commands run against a mesh: a node whose agent's heartbeats come late on a busy machine is
not taken for unreachable (it would carry a taint the tests do not expect)."""


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run `corral argv`, expect a usage error (status 2), and return what it printed on stderr."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err


def parse(argv: list[str]) -> argparse.Namespace:
    """The namespace `corral argv` parses to."""
    return build_parser().parse_args(argv)


# parsing, without a server


def test_help_lists_every_mesh_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    groups = {title: out.index(f"\n{title}:\n") for title in ("Basic commands", "Cluster management", "Mesh")}
    groups |= {title: out.index(f"\n{title}:\n") for title in ("Troubleshooting", "Other")}
    assert list(groups) == sorted(groups, key=groups.__getitem__)  # in kubectl's order: basic commands first
    listed = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ") and line[2] != "-"}
    for command in ("get", "describe", "submit", "create", "delete", "label", "taint", "cordon", "uncordon"):
        assert command in listed
    for command in ("drain", "up", "node", "sim", "why", "status", "dead-letters", "vc", "version", "completion"):
        assert command in listed
    assert out.index("  get ") < out.index("\nCluster management:") < out.index("  drain ") < out.index("\nMesh:")


@pytest.mark.parametrize(
    "argv",
    [
        ["up"],
        ["node", "start"],
        ["node", "list"],
        ["node", "remove"],
        ["sim"],
        ["taint"],
        ["label"],
        ["submit"],
        ["status"],
        ["why"],
        ["schema", "export"],
    ],
    ids=" ".join,
)
def test_every_command_has_help_naming_its_options(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: corral {' '.join(argv)}")
    if argv[0] not in ("up", "schema"):
        assert "--nats-url" in out
        assert "--timeout" in out


def test_a_taint_with_a_bad_effect_is_a_usage_error_naming_the_flag_and_the_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = usage_error(["taint", "--node-id", "n1", "--append", "gpu=true:NoWay"], capsys)
    assert "argument --append" in err
    assert "'NoWay'" in err
    assert "NoSchedule, PreferNoSchedule, NoExecute" in err


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["taint", "--append", "gpu=true"], "expected `corral taint node ID ...`"),
        (["taint", "--node-id", "n1"], "give one of --append or --delete"),
        (["taint", "--node-id", "n1", "--node-address", "10.0.0.1", "--delete", "gpu"], "name the node once"),
        (["taint", "--node-id", "n1", "--append", "gpu=true", "--delete", "gpu"], "give one of --append or --delete"),
        (["node", "start", "n1", "--resources", "CPU=lots"], "resource CPU 'lots': must be a number >= 0"),
        (["node", "start", "n1"], "--resources"),
        (["node", "start", "n1", "--resources", "CPU=1", "--labels", "a=b=c"], "'a=b=c'"),
        (["label", "--node-id", "n1", "corral.io/zone=z1"], "reserved for system labels"),
        (["label", "--node-id", "n1", "tier=a", "tier=b"], "label 'tier' given twice"),
        (["submit"], "ACTOR_ID is required"),
        (["submit", "a1", "--cpu", "2", "--resources", "CPU=1"], "give CPU once"),
        (["submit", "a1", "--selector", "zone=in(z1"], "selector 'zone=in(z1'"),
        (["submit", "a1", "--selector", "zone=z1", "--selector", "zone=z2"], "--selector: key 'zone' given twice"),
        (["submit", "a1", "--strategy", "RANDOM"], "invalid choice: 'RANDOM'"),
        (["submit", "-f", "-", "--cpu", "2"], "drop --cpu"),
        (["sim", "--nodes", "0"], "'0' must be 1 or more"),
        (["up", "--nats-port", "70000"], "'70000' must be a port between 1 and 65535"),
        (["status", "--timeout", "soon"], "'soon' is not a number of seconds"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_bad_command_lines_exit_with_status_2_and_say_why(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = usage_error(argv, capsys)
    assert f"usage: corral {argv[0]}" in err
    assert complaint in err


def test_submit_without_a_server_exits_1_saying_the_scheduler_did_not_answer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    started = time.monotonic()
    assert main(["submit", "a1", "--nats-url", url, "--timeout", "0.5"]) == 1
    assert time.monotonic() - started < 5
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "corral submit: error: the scheduler did not answer within 0.5s" in captured.err
    assert url in captured.err


def test_every_mesh_command_connects_to_corral_nats_url_by_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no endpoints file in ./.corral/
    monkeypatch.setenv("CORRAL_NATS_URL", "nats://mesh.example:4333")
    assert chosen(parse(["status"])).nats_url.value == "nats://mesh.example:4333"
    assert chosen(parse(["status", "--nats-url", "nats://other:4222"])).nats_url.value == "nats://other:4222"
    monkeypatch.delenv("CORRAL_NATS_URL")
    assert chosen(parse(["node", "list"])).nats_url.value == "nats://127.0.0.1:4222"


def test_resources_parse_to_floats_and_refuse_bad_entries_by_name() -> None:
    assert types.resources("CPU=8, GPU=1,memory=16e9") == {"CPU": 8.0, "GPU": 1.0, "memory": 16e9}
    for text, complaint in [
        ("CPU", "expected NAME=AMOUNT"),
        ("CPU=-1", "resource CPU '-1': must be a number >= 0"),
        ("CPU=1,CPU=2", "'CPU' in 'CPU=1,CPU=2': given twice"),
        ("9x=1", "name '9x'"),
        ("", "expected NAME=AMOUNT"),
    ]:
        with pytest.raises(argparse.ArgumentTypeError, match=complaint):
            types.resources(text)


def test_a_taint_defaults_to_no_schedule_and_may_leave_out_the_value() -> None:
    assert types.taint("gpu=true:NoExecute") == Taint("gpu", "true", "NoExecute")
    assert types.taint("gpu=true") == Taint("gpu", "true", "NoSchedule")
    assert types.taint("maintenance:PreferNoSchedule") == Taint("maintenance", "", "PreferNoSchedule")
    assert types.taints("a=1:NoSchedule, b") == [Taint("a", "1"), Taint("b")]
    assert types.format_taint(Taint("gpu", "true")) == "gpu=true:NoSchedule"


def test_submit_flags_build_the_schedule_request() -> None:
    args = parse(
        [
            "submit",
            "trainer",
            "--resources",
            "GPU=1",
            "--labels",
            "team=ml",
            "--selector",
            "zone=in(z1,z2)",
            "--tolerate",
            "gpu=true",
            "--tolerate",
            "spot",
            "--strategy",
            "SPREAD",
            "--priority",
            "5",
            "--max-restarts",
            "2",
        ]
    )
    request = build_request(args)
    assert request.actor_id == "trainer"
    assert request.resources == {"GPU": 1.0, "CPU": 1.0}
    assert request.labels == {"team": "ml"}
    assert request.label_selector == {"zone": "in(z1,z2)"}
    assert request.tolerations == {"gpu": "true", "spot": Exists()}
    assert request.scheduling_strategy == "SPREAD"
    assert (request.priority, request.max_restarts) == (5, 2)


def test_submit_with_cpu_zero_asks_for_no_cpu() -> None:
    assert build_request(parse(["submit", "tiny", "--cpu", "0"])).resources == {}


def test_submit_f_reads_a_whole_request_as_json_or_yaml_and_actor_id_replaces_its_own(tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"actor_id": "from-file", "resources": {"CPU": 2}, "priority": 3}))
    (request,) = build_requests(parse(["submit", "-f", str(path)]))
    assert (request.actor_id, request.resources, request.priority) == ("from-file", {"CPU": 2.0}, 3)
    assert build_requests(parse(["submit", "renamed", "--filename", str(path)]))[0].actor_id == "renamed"
    manifest = tmp_path / "request.yaml"
    manifest.write_text("actor_id: from-yaml\nresources:\n  CPU: 0.5\n")
    assert build_requests(parse(["submit", "-f", str(manifest)]))[0].resources == {"CPU": 0.5}


def test_submit_f_reads_a_list_of_requests_as_json_or_yaml_each_in_the_vc(tmp_path: Path) -> None:
    """A JSON array or a YAML sequence of requests is read whole (sent as one batch); --vc scopes each."""
    path = tmp_path / "requests.json"
    path.write_text(json.dumps([{"actor_id": "a1"}, {"actor_id": "a2", "resources": {"CPU": 2}}]))
    assert [(r.actor_id, r.vcluster_id) for r in build_requests(parse(["submit", "-f", str(path), "--vc", "t"]))] == [
        ("a1", "t"),
        ("a2", "t"),
    ]
    manifest = tmp_path / "requests.yaml"
    manifest.write_text("- actor_id: y1\n- actor_id: y2\n  priority: 2\n")
    assert [(r.actor_id, r.priority) for r in build_requests(parse(["submit", "-f", str(manifest)]))] == [
        ("y1", 0),
        ("y2", 2),
    ]


def test_submit_f_with_an_empty_or_a_bad_list_or_an_id_for_a_list_exits_1_saying_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad request in the list names its place and field; an empty list, or ACTOR_ID with a list, says why; each
    in one line, exit 1."""
    path = tmp_path / "requests.json"
    for content, args, words in (
        ('[{"actor_id": "a1"}, {"actor_id": "a2", "priority": "high"}]', [], "not a list of ScheduleRequests: "),
        ('[{"actor_id": "a1"}, {"actor_id": "a2", "priority": "high"}]', [], "$[1].priority"),
        ("[]", [], f"-f {path}: holds an empty list: nothing to submit"),
        ('[{"actor_id": "a1"}]', ["one"], f"-f {path}: holds a list of 1 requests, and ACTOR_ID names one"),
    ):
        path.write_text(content)
        assert main(["submit", *args, "-f", str(path)]) == 1
        err = capsys.readouterr().err
        assert words in err and len(err.splitlines()) == 1, err
    manifest = path.with_name("requests.yaml")
    manifest.write_text("- actor_id: y1\n- actor_id: y2\n  priority: high\n")
    assert main(["submit", "-f", str(manifest)]) == 1
    assert f"-f {manifest}: not a list of ScheduleRequests: " in capsys.readouterr().err
    single = path.with_name("request.json")
    single.write_text('{"actor_id": "a1", "resourcez": {}}')
    assert main(["submit", "-f", str(single)]) == 1
    assert f"-f {single}: not a ScheduleRequest: Object contains unknown field `resourcez`" in capsys.readouterr().err


def test_submit_json_still_reads_a_request_file_with_a_deprecation_notice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"actor_id": "from-file"}))
    assert build_requests(parse(["submit", "--json", str(path)]))[0].actor_id == "from-file"
    assert "--json FILE is deprecated and will be removed; use -f/--filename FILE" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["submit", "--help"])
    assert "--json" not in capsys.readouterr().out


def test_submit_f_that_is_not_a_request_exits_1_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"actor_id": "a1", "priority": "high"}))
    assert main(["submit", "-f", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"-f {path}: not a ScheduleRequest" in err
    assert "$.priority" in err


def test_why_lists_at_most_ten_node_ids_per_reason_then_how_many_more() -> None:
    nodes = [f"n{i:02d}" for i in range(15)]
    pending = Pending("a1", "0/15 nodes are available: 15 node(s) Insufficient GPU.", {"Insufficient GPU": 15}, {})
    pending = Pending(pending.id, pending.message, pending.reasons, {"Insufficient GPU": nodes})
    text = render_why(pending, "a1", "actor")
    assert text.splitlines()[0] == "Actor a1 is pending."
    assert "15     Insufficient GPU  n00, n01, n02, n03, n04, n05, n06, n07, n08, n09 and 5 more" in text
    assert render_why(Placed("a1", "n03"), "a1", "actor") == "Actor a1 runs on node n03."


def test_sim_spreads_nodes_over_zones_and_gives_every_tenth_gpus() -> None:
    nodes = sim_nodes(20, cpu=8, gpu_every=10, gpus=4, zones=3, prefix="sim-")
    assert [node.node_id for node in nodes[:2]] == ["sim-000", "sim-001"]
    assert [node.zone for node in nodes[:4]] == ["z0", "z1", "z2", "z0"]
    gpu_nodes = [node for node in nodes if "GPU" in node.resources]
    assert [node.node_id for node in gpu_nodes] == ["sim-009", "sim-019"]
    assert all(node.accelerator_type for node in gpu_nodes)
    assert sim_nodes(5, cpu=8, gpu_every=0, gpus=4, zones=3, prefix="x")[4].resources == {"CPU": 8}


def test_a_node_agent_reports_the_actors_it_starts_and_stops() -> None:
    watch = ActorWatch("n1")
    assert watch.line(ActorPlaced(actor_id="a1", node_id="n1")) == "started a1"
    assert watch.line(ActorPlaced(actor_id="b1", node_id="n2")) is None
    failed = ActorFailed(actor_id="a1", node_id="n1", reason="node died", will_restart=False)
    assert watch.line(failed) == "stopped a1 (node died)"
    assert watch.line(ActorRemoved(actor_id="b1")) is None
    watch.line(ActorPlaced(actor_id="a2", node_id="n1"))
    assert watch.line(ActorRemoved(actor_id="a2")) == "stopped a2 (removed)"


# against a running mesh


@pytest.fixture
def mesh(tmp_path: Path) -> Iterator[Mesh]:
    """A mesh in tmp_path, once every service answers; its nodes outlive the late heartbeats of a busy machine
    (`LASTING`): nothing run against it is about liveness."""
    running = start_mesh(tmp_path / "mesh", settings={**FAST, **LASTING})
    try:
        with SyncClient(running.nats_url, timeout=1.0) as client:
            client.wait_ready(timeout=15.0)
        yield running
    finally:
        running.stop()


@pytest.fixture
def two_nodes(mesh: Mesh) -> Iterator[SyncClient]:
    """`cpu-1` (4 CPUs, zone z1) and `gpu-1` (4 CPUs, 1 GPU, zone z2), kept alive while the test runs."""
    with SyncClient(mesh.nats_url) as client:
        client.register_node("cpu-1", {"CPU": 4}, {"tier": "web"}, zone="z1", address="10.0.0.1")
        client.register_node("gpu-1", {"CPU": 4, "GPU": 1}, {"tier": "ml"}, zone="z2", address="10.0.0.2")
        yield client


def run(argv: list[str], mesh: Mesh, capsys: pytest.CaptureFixture[str], status: int = 0) -> str:
    """Run `corral argv --nats-url <mesh>`, check its exit status, and return its stdout (stderr when it failed)."""
    assert main([*argv, "--nats-url", mesh.nats_url]) == status
    captured = capsys.readouterr()
    return captured.out if status == 0 else captured.err


@pytest.mark.integration
def test_a_user_taints_a_node_submits_and_reads_why_work_waits(
    mesh: Mesh, two_nodes: SyncClient, capsys: pytest.CaptureFixture[str]
) -> None:
    tainted = run(["taint", "--node-id", "gpu-1", "--append", "gpu=true:NoSchedule"], mesh, capsys)
    assert tainted == "node gpu-1 tainted gpu=true:NoSchedule\n"

    assert run(["submit", "web", "--cpu", "2"], mesh, capsys) == "web placed on cpu-1\n"
    pending = run(["submit", "trainer", "--resources", "GPU=1"], mesh, capsys)
    assert pending.startswith("trainer pending: 0/2 nodes are available: ")
    assert "had untolerated taint {gpu: true}" in pending

    why = run(["why", "trainer"], mesh, capsys).splitlines()
    assert why[0] == "Actor trainer is pending."
    assert why[1].startswith("Message: 0/2 nodes are available")
    reasons = {line.split()[-1]: line for line in why[3:]}
    assert "Insufficient GPU" in reasons["cpu-1"]
    assert "had untolerated taint {gpu: true}" in reasons["gpu-1"]
    assert run(["why", "web"], mesh, capsys) == "Actor web runs on node cpu-1.\n"

    status = run(["status"], mesh, capsys).splitlines()
    assert status[0] == "NODES (2):"
    assert status[1].split() == ["NODE", "ZONE", "CPU", "RESOURCES", "TAINTS", "ACTORS"]
    assert status[2].split() == ["cpu-1", "z1", "2/4", "<none>", "<none>", "1"]
    assert status[3].split() == ["gpu-1", "z2", "0/4", "GPU", "0/1", "gpu=true:NoSchedule", "0"]
    assert ["web", "placed", "cpu-1", "0"] in [line.split() for line in status]
    assert ["trainer", "pending", "-", "0"] in [line.split() for line in status]
    assert "PENDING (1):" in status
    assert any(line.startswith("trainer  0/2 nodes are available") for line in status)

    reply = json.loads(run(["status", "-o", "json"], mesh, capsys))
    assert reply["type"] == "status"
    assert [item["id"] for item in reply["pending"]] == ["trainer"]

    assert run(["submit", "tuner", "--resources", "GPU=1", "--tolerate", "gpu"], mesh, capsys) == (
        "tuner placed on gpu-1\n"
    )


@pytest.mark.integration
def test_a_user_lists_labels_untaints_and_removes_nodes(
    mesh: Mesh, two_nodes: SyncClient, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = run(["node", "list", "--selector", "tier=ml"], mesh, capsys).splitlines()
    assert [line.split()[0] for line in listed] == ["NODE", "gpu-1"]

    assert run(["label", "--node-id", "cpu-1", "tier=batch", "team=infra"], mesh, capsys) == (
        "node cpu-1 labelled tier=batch,team=infra\n"
    )
    assert [node.node_id for node in two_nodes.nodes({"team": "infra"})] == ["cpu-1"]

    run(["taint", "--node-address", "10.0.0.1", "--append", "maint:NoExecute"], mesh, capsys)
    assert two_nodes.taints("cpu-1") == {"cpu-1": [Taint("maint", "", "NoExecute")]}
    assert run(["taint", "--node-id", "cpu-1", "--delete", "maint"], mesh, capsys) == "node cpu-1 untainted maint\n"

    removed = run(["node", "remove", "gpu-1"], mesh, capsys)  # its agent (this test's client) still heartbeats
    assert removed.startswith("node gpu-1 removed, but its agent was heard from")
    assert [node.node_id for node in two_nodes.nodes()] == ["cpu-1"]


@pytest.mark.integration
def test_refused_commands_exit_1_with_the_services_reason(
    mesh: Mesh, two_nodes: SyncClient, capsys: pytest.CaptureFixture[str]
) -> None:
    err = run(["why", "ghost"], mesh, capsys, status=1)
    assert "corral why: error: unknown actor 'ghost'" in err
    err = run(["taint", "node", "ghost", "gpu-"], mesh, capsys, status=1)
    assert "corral taint: error: node 'ghost': no such live node" in err
    err = run(["taint", "node", "10.9.9.9", "gpu=true", "--by-address"], mesh, capsys, status=1)
    assert "corral taint: error: no live node has address '10.9.9.9'" in err
    err = run(["cordon", "ghost"], mesh, capsys, status=1)
    assert "corral cordon: error: node 'ghost': no such live node" in err
    err = run(["node", "remove", "ghost"], mesh, capsys, status=1)
    assert "no such node" in err


class Lines:
    """The stdout (or another stream) of a child process, line by line, readable with a deadline."""

    def __init__(self, process: subprocess.Popen[str], stream: IO[str] | None = None) -> None:
        """Read `stream` (default: the process's stdout)."""
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.process = process
        stream = stream or process.stdout
        assert stream is not None
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        with contextlib.suppress(ValueError, OSError):  # the test closed the pipe (its process is gone)
            for line in stream:
                self.lines.put(line)

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        """The first line (from here on) containing `text`; fails after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.1)
            except queue.Empty:
                continue
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"no line with {text!r} within {timeout}s; saw {self.seen!r}; {self._exit()}")

    def _exit(self) -> str:
        """How the process ended, with its stderr when piped; or that it still runs."""
        code = self.process.poll()
        if code is None:
            return "it still runs"
        stderr = self.process.stderr.read() if self.process.stderr is not None else "(not piped)"
        return f"it exited with code {code}; stderr: {stderr!r}"


def corral(*argv: str) -> subprocess.Popen[str]:
    """`corral argv` in a child process (its own stdout and stderr pipes)."""
    env = {**os.environ, **FAST, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}  # SIGABRT: every stack
    return subprocess.Popen(
        [sys.executable, "-m", "services.cli", *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop(process: subprocess.Popen[str], signum: signal.Signals) -> tuple[int, str]:
    """Send `signum`, wait for the exit, and return the exit status and stderr; a process still running 20 s later
    is aborted (its threads' stacks go to stderr) and the test fails with what it wrote."""
    process.send_signal(signum)
    try:
        _, err = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        try:
            _, err = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            _, err = process.communicate()
        pytest.fail(f"{process.args!r} still ran 20 s after {signum.name}; its stderr:\n{err[-6000:]}")
    return process.returncode, err


@pytest.mark.integration
def test_corral_up_serves_node_agents_until_a_signal_stops_it(tmp_path: Path) -> None:
    port = free_port()
    http_port = free_port()
    up = corral("up", "--nats-port", str(port), "--http-port", str(http_port), "--data-dir", str(tmp_path / "corral"))
    agent: subprocess.Popen[str] | None = None
    try:
        up_lines = Lines(up)
        assert up_lines.wait_for("Corral is up") == f"Corral is up: NATS at nats://127.0.0.1:{port}\n"
        assert up_lines.wait_for("export") == f"  export CORRAL_NATS_URL=nats://127.0.0.1:{port}\n"
        web = f"http://127.0.0.1:{http_port}/"
        assert up_lines.wait_for("HTTP API") == f"HTTP API at {web} (docs at /docs)\n"
        assert httpx.get(f"{web}readyz", timeout=10.0).json()["ready"] is True
        url = f"nats://127.0.0.1:{port}"

        agent = corral("node", "start", "n1", "--resources", "CPU=2", "--zone", "z1", "--nats-url", url)
        agent_lines = Lines(agent)
        assert agent_lines.wait_for("registered") == "node n1 registered (CPU=2) in zone z1; Ctrl-C stops it\n"
        assert main(["submit", "a1", "--nats-url", url]) == 0
        assert agent_lines.wait_for("started") == "started a1\n"

        status, err = stop(agent, signal.SIGINT)
        assert status == 0
        assert "node n1 stopped" in err
        with SyncClient(url) as client:  # not removed: unreachable once its heartbeats are missed, then dead
            deadline = time.monotonic() + 20
            seen_unreachable = False
            while (nodes := client.nodes()) and time.monotonic() < deadline:
                seen_unreachable |= any(t.key == "corral.io/unreachable" for t in nodes[0].taints)
                time.sleep(0.1)
            assert client.nodes() == []
            assert seen_unreachable

        status, err = stop(up, signal.SIGTERM)
        assert status == 0
        assert "stopped" in err
    finally:
        for process in (agent, up):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()


@pytest.mark.integration
def test_corral_sim_started_before_the_labels_service_registers_its_nodes_once_it_answers(tmp_path: Path) -> None:
    """As in a compose deployment, which starts the simulator beside the services: it asks again while labels
    does not answer, instead of giving up at once."""
    mesh = start_mesh(tmp_path / "mesh", services=("taints", "vclusters", "scheduler"), settings={**FAST, **LASTING})
    sim: subprocess.Popen[str] | None = None
    try:
        sim = corral("sim", "--nodes", "3", "--nats-url", mesh.nats_url)
        time.sleep(1.5)  # the condition under test: the simulator runs while no labels service answers
        assert sim.poll() is None, f"corral sim gave up: {sim.communicate(timeout=5)}"
        mesh.start_service("labels")
        assert "3 simulated nodes registered" in Lines(sim).wait_for("simulated nodes registered", timeout=60)
        with SyncClient(mesh.nats_url) as client:
            assert sorted(node.node_id for node in client.nodes()) == ["sim-000", "sim-001", "sim-002"]
        status, _ = stop(sim, signal.SIGINT)
        assert status == 0
    finally:
        if sim is not None and sim.poll() is None:
            sim.kill()
        mesh.close()
