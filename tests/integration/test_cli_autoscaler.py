"""`corral up --autoscaler CONFIG.yaml` runs the fifth service; `corral autoscaler status` and `corral why` show
what it does."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from schemas import ScheduleRequest
from services.client import SyncClient
from services.local.servers import free_port
from tests.autoscaler.test_start import alias_bomb
from tests.cli.test_commands import Lines, corral, stop
from tests.integration.autoscaling import write_config

pytestmark = pytest.mark.integration


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    """The processes a test starts; any still running at the end is killed."""
    processes: list[subprocess.Popen[str]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()


def output(*argv: str) -> str:
    """What `corral argv` prints (it must succeed)."""
    process = corral(*argv)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    return out


def test_corral_up_runs_the_autoscaler_that_status_and_why_report(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    config = write_config(tmp_path)
    ports = ("--nats-port", str(port), "--http-port", str(free_port()))
    up = corral("up", *ports, "--data-dir", str(tmp_path / "corral"), "--autoscaler", str(config))
    started.append(up)
    Lines(up).wait_for("Corral is up")
    with SyncClient(url, timeout=10.0) as client:
        client.register_node("n0", {"CPU": 2}, labels={"disk": "ssd"})
        client.submit(ScheduleRequest("odd", {"CPU": 1}, label_selector={"rack": "r9"}))
        client.submit(ScheduleRequest("typo", {"CPU": 1}, label_selector={"acelerator-type": "A100"}))
        deadline = time.monotonic() + 10
        while "no node type" not in client.autoscaler_why("odd").message and time.monotonic() < deadline:
            time.sleep(0.05)  # the round after the actor's pending event
        status = output("autoscaler", "status", "--nats-url", url)
        assert "NODE TYPES (3):" in status and "gpu-a100" in status
        assert "1 x actor {CPU: 1}" in status
        reply = yaml.safe_load(output("autoscaler", "status", "-o", "yaml", "--nats-url", url))
        assert "gpu-a100" in str(reply)
        why = output("why", "odd", "--nats-url", url)
        assert "Actor odd is pending." in why and "autoscaler: no node type can host it" in why
        assert "no node or node type of the autoscaler has a label key 'rack'" in why
        typo = output("why", "typo", "--nats-url", url)  # the key is suggested from the node types' labels
        assert "label key 'acelerator-type' (did you mean 'accelerator-type'?)" in typo
    code, _ = stop(up, signal.SIGTERM)
    assert code == 0


def test_corral_up_refuses_a_bad_autoscaler_file_before_starting_anything(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("node_types:\n  cpu:\n    resources: {CPU: 4}\n    min_workers: two\n")
    up = corral(
        "up", "--nats-port", str(free_port()), "--data-dir", str(tmp_path / "corral"), "--autoscaler", str(config)
    )
    _, err = up.communicate(timeout=30)
    assert up.returncode == 2 and "min_workers" in err and "two" in err, err
    assert not (tmp_path / "corral" / "nats").exists()


@pytest.mark.parametrize(
    ("contents", "said"),
    [
        (alias_bomb(), "anchors and aliases (&name, *name) are not allowed in this file (line 1, column 4)"),
        ("node_types: {" + "x" * 2_000_000 + ": {}}\n", "2000019 bytes, over the 1048576-byte limit"),
    ],
    ids=["an alias bomb", "a file of 2 MB"],
)
def test_corral_up_refuses_a_file_past_the_limits_at_once_with_exit_2_in_one_line(
    tmp_path: Path, contents: str, said: str
) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(contents)
    started = time.monotonic()
    up = corral(
        "up", "--nats-port", str(free_port()), "--data-dir", str(tmp_path / "corral"), "--autoscaler", str(config)
    )
    _, err = up.communicate(timeout=60)
    print(f"refused in {time.monotonic() - started:.1f} s (the process's start included)")
    assert up.returncode == 2 and err.count("\n") == 1 and said in err and len(err) < 300, err
    assert not (tmp_path / "corral" / "nats").exists()


def test_the_demos_autoscaler_act_scales_up_explains_and_scales_down() -> None:
    """`make run`'s last act, on a mesh of its own."""
    process = subprocess.run(
        [sys.executable, "-m", "services.cli.demo.autoscaling"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert process.returncode == 0, process.stderr
    out = process.stdout
    assert "trainer placed on gpu-a100-L1" in out
    assert "autoscaler: no node type can host it: cpu-4 doesn't match the label selector" in out
    assert "gpu-a100-L1 tainted corral.io/scale-down=true:NoSchedule, terminated and removed" in out
