"""`corral bench pending --mesh`: the burst drains through a real mesh, and the figures come out."""

from __future__ import annotations

import json

import pytest

from services.cli.__main__ import main

pytestmark = pytest.mark.integration


def test_the_burst_drains_through_the_mesh(capsys: pytest.CaptureFixture[str]) -> None:
    arguments = ["--nodes", "10", "--pending", "200", "--unrelated", "12", "--mesh", "-o", "json"]
    assert main(["bench", "pending", *arguments]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["where"] == "mesh"
    assert figures["still_pending"] == 0  # the group's removal was answered once every waiting actor was placed
    assert figures["unrelated_requests"] == (12 + 2) + (12 + 12)  # removals start with the eleventh submit
    assert 0 < figures["unrelated_ms_p50"] <= figures["unrelated_ms_p99"]
