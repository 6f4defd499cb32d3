"""The autoscaler phase's figures and checks, read from a log written here: a clean run meets every check, and each
broken rule is reported as not met in the targets table (never raised)."""

from __future__ import annotations

from loadtest.autoscaled import CPU_TYPE, GPU_TYPE, MAX_WORKERS, AutoscalerFigures, autoscaler_figures
from loadtest.report import autoscaler_goals, format_report
from schemas import (
    ActorPending,
    ActorPlaced,
    ActorRemoved,
    AnyEvent,
    Explanation,
    NodeLaunchFailed,
    NodeRegistered,
    NodesLaunchRequested,
    NodeTerminationRequested,
)
from services.core.labels import LAUNCH_ID, NODE_TYPE
from tests.loadtest.reports import report_of

WAITS = Explanation(total=2, message="0/2 nodes are available: 2 node(s) didn't match the label selector.")


def pending(actor: str) -> ActorPending:
    return ActorPending(actor_id=actor, explanation=WAITS)


def launch(node_type: str, launch_id: str, *work: str) -> NodesLaunchRequested:
    return NodesLaunchRequested(node_type=node_type, launch_ids=[launch_id], reason="pending work", work=list(work))


def registered(node_type: str, launch_id: str) -> NodeRegistered:
    labels = {NODE_TYPE: node_type, LAUNCH_ID: launch_id}
    return NodeRegistered(node_id=f"{node_type}-{launch_id}", resources={"CPU": 4.0}, labels=labels)


def terminated(node_type: str, launch_id: str) -> NodeTerminationRequested:
    return NodeTerminationRequested(node_id=f"{node_type}-{launch_id}", launch_id=launch_id, reason="idle")


CLEAN: list[tuple[float, AnyEvent]] = [
    (1.0, pending("a")),
    (1.0, pending("g")),
    (1.1, launch(CPU_TYPE, "L1", "a")),
    (1.2, launch(GPU_TYPE, "L2", "g")),
    (1.5, registered(CPU_TYPE, "L1")),
    (1.6, ActorPlaced(actor_id="a", node_id="lt-cpu-L1")),
    (1.8, registered(GPU_TYPE, "L2")),
    (2.0, ActorPlaced(actor_id="g", node_id="lt-gpu-L2")),
    (2.0, ActorPlaced(actor_id="b", node_id="lt-cpu-L1")),
    (5.5, ActorRemoved(actor_id="a")),
    (5.5, ActorRemoved(actor_id="b")),
    (5.5, ActorRemoved(actor_id="g")),
    (9.0, terminated(CPU_TYPE, "L1")),
    (9.0, terminated(GPU_TYPE, "L2")),
]


def figures_of(events: list[tuple[float, AnyEvent]], scale_down: tuple[float | None, int, int]) -> AutoscalerFigures:
    return autoscaler_figures(events, settled_at=5.0, scale_down=scale_down)


def test_a_clean_run_meets_every_check_with_its_figures_read_from_the_log() -> None:
    figures = figures_of(CLEAN, (4.0, 2, 0))

    assert (figures["launched"], figures["registered"], figures["with_work"], figures["launches_failed"]) == (
        2,
        2,
        2,
        0,
    )
    assert figures["actors"] == 3 and figures["still_pending"] == 0
    assert figures["pending_to_launch_ms"] == {"actors": 2, "p50": 100.0, "p99": 200.0}
    assert figures["pending_to_placed_ms"] == {"actors": 2, "p50": 600.0, "p99": 1000.0}
    assert figures["growth_s"] == 0.8 and figures["placements_per_s"] == 1.2  # a placed by the last registration
    assert figures["peak"] == {CPU_TYPE: 1, GPU_TYPE: 1}
    assert [goal["met"] for goal in autoscaler_goals(figures)] == [True] * 5


def test_each_broken_rule_is_reported_as_not_met_in_the_table() -> None:
    events: list[tuple[float, AnyEvent]] = [
        *CLEAN[:8],
        (3.0, pending("c")),  # launched for, never placed: still pending when the users stopped
        (3.0, pending("d")),
        (3.1, launch(CPU_TYPE, "L3", "c")),
        (3.1, launch(CPU_TYPE, "L4", "d")),
        (3.2, registered(CPU_TYPE, "L3")),  # registers while c waits, never gets work
        (3.3, ActorPlaced(actor_id="d", node_id="lt-cpu-L1")),
        *[(3.4, launch(CPU_TYPE, f"L{n}", "d")) for n in range(5, 8)],  # five lt-cpu launches at once: max is 4
        (4.0, NodeLaunchFailed(launch_id="L7", reason="did not register within 20s")),
        (5.5, ActorRemoved(actor_id="c")),  # removed by the clean-up after the settle: it was still pending
    ]
    figures = figures_of(events, (None, 4, 2))

    assert figures["idle_with_demand"] == ["lt-cpu-L3"]
    assert figures["peak"][CPU_TYPE] == MAX_WORKERS[CPU_TYPE] + 2
    assert figures["still_pending"] == 1 and figures["launches_failed"] == 1
    goals = autoscaler_goals(figures)
    assert [goal["met"] for goal in goals] == [False] * 5
    report = report_of(goals, autoscaler=figures)
    text = format_report(report)
    assert "== autoscaled nodes: lt-cpu (max 4), lt-gpu (max 3) launched for the users' work" in text
    assert "not met  autoscaler: no launched node left without work while work it was launched for waited" in text
    assert "launched nodes not all gone in time; 4 nodes left (2 launched)" in text
