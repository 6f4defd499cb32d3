"""The start-up replay benchmark: its log is what the core writes, and a small run gives consistent figures.

Nothing here is timed: the figures only have to exist, be positive and agree with one another.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadtest.replay.cli import main
from loadtest.replay.figures import ReplayConfig
from loadtest.replay.log import generate
from loadtest.replay.report import format_report
from services.core.state import replay
from services.core.state.snapshot import digest


def test_the_log_is_exactly_the_events_asked_for_and_folds() -> None:
    events = generate(ReplayConfig(events=3000, nodes=10, live=50))

    assert len(events) == 3000
    names = [type(event).__name__ for event in events]
    assert names[0] == "SchedulerElected"
    assert names[1:11] == ["NodeRegistered"] * 10
    assert set(names[11:]) == {"ActorPlaced", "ActorRemoved"}  # each actor placed as submitted: one event
    assert len({event.event_id for event in events}) == 3000
    view = replay(events)
    assert len(view.nodes) == 10
    assert len(view.actors) <= 51
    assert digest(view) == digest(replay(generate(ReplayConfig(events=3000, nodes=10, live=50))))


def test_a_tail_as_long_as_the_log_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--events", "100", "--tail", "100"])

    assert stopped.value.code == 2
    assert "--tail 100 must be below --events 100" in capsys.readouterr().err


@pytest.mark.integration
@pytest.mark.bench
def test_a_small_run_prints_consistent_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--events", "5000", "--tail", "500", "--nodes", "50", "--live", "500", "--json", "--quiet"]

    assert main([*argv, "--data-dir", str(tmp_path)]) == 0

    report = json.loads(capsys.readouterr().out)
    assert report["events"] == 5_000
    assert sum(report["event_types"].values()) == 5_000
    assert report["nodes"] == 50
    assert 0 < report["live_actors"] <= 501
    full, restart, snapshot = report["full_replay"], report["restart"], report["snapshot"]
    assert (full["snapshot_sequence"], full["replayed"], full["sequence"]) == (0, 5_000, 5_000)
    assert (snapshot["sequence"], restart["snapshot_sequence"]) == (4_500, 4_500)
    assert (restart["replayed"], restart["sequence"]) == (500, 5_000)
    assert report["digests_equal"] is True
    assert full["digest"] == restart["digest"] == report["fold_digest"]
    for start in (full, restart):
        assert 0 < start["ready_s"] <= start["served_s"]
        assert start["replayed_per_s"] > 0
        assert start["log_errors"] == 0
    assert report["read_only"]["missing"] == 0
    for name in ("append", "read_only", "decode", "fold_only"):
        assert report[name]["events"] == 5_000
        assert report[name]["seconds"] > 0
        assert report[name]["events_per_s"] > 0
    assert snapshot["bytes"] > 0
    assert report["restart_with_process_start_s"] >= restart["served_s"]
    assert [goal["name"] for goal in report["targets"]] == ["startup_replay", "fold_only", "restart"]
    assert all(isinstance(goal["met"], bool) for goal in report["targets"])
    assert "requirements:" in format_report(report)
    assert (tmp_path / "nats" / "nats-server.log").exists()
