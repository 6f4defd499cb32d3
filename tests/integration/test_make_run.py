"""`make run`: the demo through the bus on an embedded mesh, then the autoscaler's act; both meshes stop cleanly."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


def test_make_run_places_explains_tells_the_history_and_stops_cleanly() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "services.cli.demo.mesh"], capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    for section in ("PLACEMENTS", "EVENTS", "PENDING (why each is waiting)", "HISTORY", "=== the autoscaler"):
        assert section in out, section
    assert "  restarted on cpu-1a after cpu-1c died" in out  # cache's history, read back from the log
    assert "evicted: had untolerated taint {maintenance: now}" in out  # web-2's
    assert "Chosen: cpu-2a, the top-scored feasible node." in out  # why-placed re-ran the scheduler's decision
    assert done.stderr.count("mesh stopped cleanly") == 2
    assert "snapshot store unreachable" not in done.stderr
