"""The start-up replay benchmark's requirements, judged on one run's report."""

from __future__ import annotations

from loadtest.replay.figures import Goal, ReplayReport, Start

REPLAY_TARGET = 50_000.0
"""Events folded per second on start-up that the requirement asks for."""
RESTART_TARGET_S = 5.0
"""Seconds from a restart with a snapshot of a 1,000,000-event log until the service serves again."""


def _wrong(start: Start, fold_digest: str) -> str:
    """Why a start's view is not the fold of the log ("" when it is)."""
    problems = []
    if start["digest"] != fold_digest:
        problems.append("its view DIFFERS from the fold of the log")
    if start["log_errors"]:
        problems.append(f"{start['log_errors']:,} errors logged")
    return "; " + ", ".join(problems) if problems else ""


def targets(report: ReplayReport) -> list[Goal]:
    """The start-up requirements, judged on this run (a start whose view is wrong meets nothing)."""
    full, fold, restart = report["full_replay"], report["fold_only"], report["restart"]
    process = report["restart_with_process_start_s"]
    full_wrong, restart_wrong = _wrong(full, report["fold_digest"]), _wrong(restart, report["fold_digest"])
    return [
        Goal(
            name="startup_replay",
            goal=f"events folded/s on start-up >= {REPLAY_TARGET:,.0f} (log read from NATS, decoded, folded)",
            measured=f"{full['replayed_per_s']:,.0f}/s ({full['replayed']:,} events in {full['ready_s']:.2f} s)"
            + full_wrong,
            met=full["replayed_per_s"] >= REPLAY_TARGET and not full_wrong,
        ),
        Goal(
            name="fold_only",
            goal=f"events folded/s without I/O >= {REPLAY_TARGET:,.0f} (SchedulerView.fold on decoded events)",
            measured=f"{fold['events_per_s']:,.0f}/s (decode and fold {report['decode_and_fold_events_per_s']:,.0f}/s)",
            met=fold["events_per_s"] >= REPLAY_TARGET,
        ),
        Goal(
            name="restart",
            goal=f"restart with a snapshot of a {report['events']:,}-event log serves within {RESTART_TARGET_S:g} s",
            measured=(
                f"{restart['served_s']:.2f} s in process ({restart['replayed']:,}-event tail), "
                f"{process:.2f} s with the interpreter's start"
            )
            + restart_wrong,
            met=process <= RESTART_TARGET_S and not restart_wrong,
        ),
    ]
