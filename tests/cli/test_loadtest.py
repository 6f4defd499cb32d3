"""`corral loadtest`: locust with Corral's locustfile, from any folder, every argument passed to locust."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from services.cli.__main__ import main


def corral_loadtest(folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`corral loadtest argv` as a user runs it, in `folder` (not the repository)."""
    return subprocess.run(
        [sys.executable, "-m", "services.cli", "loadtest", *argv],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_it_runs_the_installed_locustfile_from_another_folder_with_corrals_options(tmp_path: Path) -> None:
    done = corral_loadtest(tmp_path, "--corral-nodes", "2", "--list")
    assert (done.returncode, done.stdout.split()) == (0, ["Available", "Users:", "CorralUser"]), done.stderr


def test_help_is_locusts(tmp_path: Path) -> None:
    done = corral_loadtest(tmp_path, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: locust [options]")


def test_without_locust_it_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    find_spec = importlib.util.find_spec

    def locust_missing(name: str, package: str | None = None) -> Any:
        return None if name == "locust" else find_spec(name, package)

    def never(*_: object) -> None:
        raise AssertionError("locust was started")

    monkeypatch.setattr(importlib.util, "find_spec", locust_missing)
    monkeypatch.setattr(os, "execv", never)
    assert main(["loadtest", "--headless"]) == 1
    assert (
        capsys.readouterr().err == "corral loadtest: error: locust is not installed: pip install 'corral[loadtest]'\n"
    )
