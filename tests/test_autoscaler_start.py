"""The autoscaler refuses a bad node-types file at start: one line naming the field, the value and the rule, exit 2,
before it connects to anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def start(config: str) -> subprocess.CompletedProcess[str]:
    """Run `python -m services.autoscaler` with CORRAL_AUTOSCALER_CONFIG set to `config`."""
    env = {**os.environ, "CORRAL_AUTOSCALER_CONFIG": config, "CORRAL_NATS_URL": "nats://127.0.0.1:1"}
    return subprocess.run(
        [sys.executable, "-m", "services.autoscaler"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("node_types:\n  cpu:\n    resources: {CPU: 4}\n    max_workers: -1\n", "max_workers"),
        ("node_types:\n  cpu:\n    resources: {CPU: 4}\n    max_worker: 3\n", "max_worker"),
        ("provider: {type: cloud}\nnode_types:\n  cpu:\n    resources: {CPU: 4}\n", "provider.type"),
    ],
    ids=["a negative max_workers", "a misspelt key", "an unknown provider"],
)
def test_a_bad_config_file_stops_the_autoscaler_with_exit_2_naming_the_field(
    tmp_path: Path, text: str, said: str
) -> None:
    path = tmp_path / "autoscaler.yaml"
    path.write_text(text)
    result = start(str(path))
    assert result.returncode == 2, result.stderr
    assert said in result.stderr and str(path) in result.stderr


def test_a_missing_config_file_stops_the_autoscaler_with_exit_2(tmp_path: Path) -> None:
    result = start(str(tmp_path / "nowhere.yaml"))
    assert result.returncode == 2 and "cannot read it" in result.stderr, result.stderr
