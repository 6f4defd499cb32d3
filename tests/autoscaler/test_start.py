"""The autoscaler refuses a bad node-types file at start: one line naming the field, the value and the rule, exit 2,
before it connects to anything."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


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


def alias_bomb() -> str:
    """A node-types file of about 456 bytes whose nested aliases expand to 9**9 strings."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    return "\n".join(lines) + "\nnode_types: *i\n"


def test_an_alias_bomb_stops_the_autoscaler_at_once_with_exit_2_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb())
    started = time.monotonic()
    result = start(str(path))
    took = time.monotonic() - started
    print(f"{path.stat().st_size}-byte alias bomb refused in {took:.1f} s (the process's start included)")
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()[-1:]
    assert "anchors and aliases" in line and str(path) in line and len(line) < 300, line
    assert "MemoryError" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("count", "said"),
    [(1_001, "1001 node types, over the limit of 1000"), (230_000, "over the 1048576-byte limit")],
    ids=["1,001 node types: over the cap", "230,000 node types: over the size limit"],
)
def test_too_many_node_types_stop_the_autoscaler_with_exit_2_naming_the_limit(
    tmp_path: Path, count: int, said: str
) -> None:
    path = tmp_path / "many.yaml"
    path.write_text(
        "node_types:\n" + "".join(f"  t{n}: {{resources: {{CPU: 1}}, max_workers: 1}}\n" for n in range(count))
    )
    result = start(str(path))
    assert result.returncode == 2 and said in result.stderr, result.stderr[-500:]
