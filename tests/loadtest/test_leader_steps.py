"""`python -m loadtest.leader_steps` splits the leading scheduler's CPU per request into steps that add up."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from loadtest.leader_instructions import main as instructions_main
from loadtest.leader_steps import STEPS, main
from services import CORE_BUILD


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--nodes", "0"], "argument --nodes: '0' must be 1 or more"),
        (["--users", "-3"], "argument --users: '-3' must be 1 or more"),
        (["--decision-workers", "-1"], "argument --decision-workers: '-1' must be 0 or more"),
        (["--decision-workers", "65"], "argument --decision-workers: 65 must be at most 64"),
    ],
)
def test_an_option_both_leader_tools_share_is_refused_alike_before_any_mesh_starts(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in (main, instructions_main):
        with pytest.raises(SystemExit) as refused:
            command(argv)
        assert refused.value.code == 2 and says in capsys.readouterr().err


@pytest.mark.parametrize("value", ["nan", "1e999"])
def test_a_bad_duration_is_refused_naming_it(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["--duration", value])
    assert refused.value.code == 2 and f"argument --duration: '{value}' must be a number of seconds above 0" in (
        capsys.readouterr().err
    )


@pytest.mark.integration
@pytest.mark.bench
@pytest.mark.parametrize("workers", [0, 1])
def test_a_small_run_splits_every_request_into_steps_that_add_up_to_its_cpu(workers: int) -> None:
    """The scheduler deciding alone, then the applier of a decision worker."""
    command = [sys.executable, "-m", "loadtest.leader_steps", "--nodes", "20", "--users", "4", "--duration", "2"]
    command += ["--decision-workers", str(workers)]
    done = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout)
    assert figures["requests"] > 0 and figures["requests_per_s"] > 0 and figures["decision_workers"] == workers
    assert figures["core"] == CORE_BUILD  # the scheduler runs in the tool's process, which runs this suite's build
    steps = figures["us_per_request"]
    assert set(steps) == {*STEPS, "total"}
    assert all(steps[name] > 0 for name in ("core", "answering", "decoding_and_metrics", "reading", "appending"))
    assert steps["folding"] > 0, "the log's echo of every batch is read back"
    assert abs(sum(steps[name] for name in STEPS) - steps["total"]) <= 0.5  # each rounded to a tenth
