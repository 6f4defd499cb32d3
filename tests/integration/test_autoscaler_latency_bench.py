"""`python -m loadtest.autoscaler_latency` measures every actor it submits and prints its figures."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


def test_the_latency_benchmark_measures_each_actor_from_the_log() -> None:
    command = [sys.executable, "-m", "loadtest.autoscaler_latency", "--actors", "3", "--interval", "0.5", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.splitlines()[-1])
    assert figures["measured"] == figures["actors"] == 3
    assert 0 <= figures["p50_ms"] <= figures["p95_ms"] <= figures["max_ms"]
    assert figures["target_ms"] == 600
