"""`python -m loadtest.chaos` for a few seconds: it kills pieces of a real mesh, restarts them, and prints every
figure (whether the targets are met is the run's finding, not this test's). Marked `chaos`: `make test` skips it,
`pytest -m chaos` runs it (about 40 s)."""

from __future__ import annotations

import json

import pytest

from loadtest.chaos.cli import main
from loadtest.chaos.monkey import VICTIMS

pytestmark = [pytest.mark.integration, pytest.mark.chaos]


def test_a_short_chaos_run_kills_and_restarts_and_prints_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--seconds", "18", "--kill-every", "1", "--nats-outage-max", "3", "--settle", "10", "--json", "--quiet"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["kills"]) <= set(VICTIMS) and sum(report["kills"].values()) >= 4
    total = report["requests"]["total"]
    assert total["sent"] > 0 and total["answered"] > 0
    assert {"submit", "remove", "register"} <= set(report["requests"])
    assert set(report["digests"]) == {"labels", "taints", "vclusters", "scheduler"}
    for figure in ("lost", "decided_twice", "over_full", "longest_unavailability_s", "targets_met"):
        assert figure in report
