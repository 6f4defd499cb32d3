"""The tests' `corral` runner gives what a fresh `python -m services.cli` gives: status, output, environment, folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli_runner import RUNNER


@pytest.mark.parametrize(
    "argv",
    [["--version"], ["config", "view", "-o", "json"], ["get", "nodes", "--selecter", "x=y"], ["no-such-command"]],
    ids=["version", "config view (environment and folder)", "a flag typo (status 2)", "an unknown command"],
)
def test_a_command_through_the_runner_matches_a_fresh_process(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    RUNNER.run(["--version"], timeout=60)  # the runner started in the folder pytest runs in, not in this one
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".corral").mkdir()
    (tmp_path / ".corral" / "endpoints.json").write_text("not JSON")  # named on stderr when read from this folder
    monkeypatch.setenv("CORRAL_NATS_URL", "nats://127.0.0.1:1")
    fresh = subprocess.run(
        [sys.executable, "-m", "services.cli", *argv], capture_output=True, text=True, timeout=60, check=False
    )
    forked = RUNNER.run(argv, timeout=60)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    if argv[0] == "config":
        assert "nats://127.0.0.1:1" in forked.stdout and "endpoints.json" in forked.stderr
