"""`corral bench pending`: a tiny run drains every waiting actor and prints its figures (never judged on time)."""

from __future__ import annotations

import json

import pytest

from services.cli.__main__ import main


def test_a_tiny_run_drains_the_burst_and_prints_its_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "pending", "--nodes", "20", "--pending", "300", "--unrelated", "15", "-o", "json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["pending"] == 300
    assert figures["still_pending"] == 0  # the one event freed room for all of them, and every one was placed
    assert figures["unrelated_requests"] == 2 * (15 + 15 - 10)  # submits, and removals after the first ten
    assert figures["unrelated_ms_p50"] <= figures["unrelated_ms_p99"]
    assert figures["drain_s"] >= 0
