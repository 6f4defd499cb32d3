"""`python -m loadtest.leader_steps` splits the leading scheduler's CPU per request into steps that add up."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from loadtest.leader_steps import STEPS, main


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--nodes", "0"], "argument --nodes: '0' must be 1 or more"),
        (["--users", "-3"], "argument --users: '-3' must be 1 or more"),
        (["--duration", "nan"], "argument --duration: 'nan' must be a number of seconds above 0"),
        (["--duration", "1e999"], "argument --duration: '1e999' must be a number of seconds above 0"),
    ],
)
def test_a_bad_option_is_refused_naming_it_before_any_mesh_starts(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2 and says in capsys.readouterr().err


@pytest.mark.integration
@pytest.mark.bench
def test_a_small_run_splits_every_request_into_steps_that_add_up_to_its_cpu() -> None:
    command = [sys.executable, "-m", "loadtest.leader_steps", "--nodes", "20", "--users", "4", "--duration", "2"]
    done = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout)
    assert figures["requests"] > 0 and figures["requests_per_s"] > 0
    steps = figures["us_per_request"]
    assert set(steps) == {*STEPS, "total"}
    assert steps["core"] > 0 and steps["answering"] > 0 and steps["decoding_and_metrics"] > 0
    assert abs(sum(steps[name] for name in STEPS) - steps["total"]) <= 0.5  # each rounded to a tenth
