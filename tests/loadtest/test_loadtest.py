"""The load test harness: figures come out of a real mesh, latencies are ordered, the JSON parses (nothing is timed)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadtest.autoscaled import EXISTING_NODES, GPU_TYPE, USERS
from loadtest.cli import main
from loadtest.costs import cost_lines, costs_of
from loadtest.floor.drive import shares
from loadtest.harness import Config, mesh_pids, run_load
from loadtest.report import Goal, Phase, format_report, goals, to_json
from loadtest.stats import Latency, percentile
from loadtest.users import Drive
from services.client import Client
from services.local.mesh import Mesh, start_mesh
from tests.loadtest.reports import phase, report_of

TINY = Config(
    nodes=20,
    users=2,
    duration=1.0,
    floor_duration=1.0,
    fixed_duration=0.5,
    warmup=0.2,
    hold=5,
    connections=2,
    timeout=5.0,
    quiet=True,
    tenants=4,
    autoscaler_duration=0.0,
)


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    """nats-server, redis-server and the services in a temporary folder, for this module's tests."""
    started = start_mesh(Path(tmp_path_factory.mktemp("mesh")))
    try:
        yield started
    finally:
        started.stop()


def assert_ordered(latency: Latency) -> None:
    """p50 <= p95 <= p99 <= max, all of them positive."""
    assert 0 < latency["p50"] <= latency["p95"] <= latency["p99"] <= latency["max"]


async def _virtual_clusters(nats_url: str) -> list[str]:
    async with Client(nats_url) as client:
        return [info.cluster_id for info in await client.virtual_clusters()]


@pytest.mark.integration
@pytest.mark.bench
def test_a_tiny_run_places_actors_and_reports_every_phase(mesh: Mesh) -> None:
    report = asyncio.run(run_load(TINY, mesh.nats_url, mesh_pids(mesh), clean_up=False))

    assert list(report["phases"]) == ["corral", "fixed_rate", "tenants", "tenants_root", "floor"]
    corral, floor, fixed = (report["phases"][name] for name in ("corral", "floor", "fixed_rate"))
    assert corral["placements"] > 0
    assert corral["placements_per_s"] > 0
    assert floor["placements"] > 0
    assert floor["decider"] is not None
    assert floor["decider"]["requests"] > 0
    assert fixed["mode"] == "open"
    assert fixed["rate_target"] == pytest.approx(corral["placements_per_s"] / 2, abs=0.1)
    for figures in (corral, floor, fixed):
        assert_ordered(figures["latency_ms"])
        assert figures["rows"][-1]["name"] == "Aggregated"
        assert figures["rows"][-1]["requests"] == figures["requests"]
    names = ["throughput", "floor_share", "p99", "inside_cost", "serial_us", "mesh_us", "fast_p99", "inside_cpu"]
    assert [goal["name"] for goal in report["targets"]] == names
    assert all(goal["met"] is not None for goal in report["targets"])
    costs = corral["costs"]
    assert costs["serial_us"] is not None and costs["serial_us"] > 0
    assert costs["projection_per_s"] == round(1e6 / costs["serial_us"])
    assert costs["mesh_us"] is not None and costs["mesh_us"] > costs["serial_us"]
    assert floor["costs"]["serial_us"] is None  # the floor's requests never cross the scheduler
    assert json.loads(to_json(report))["phases"]["corral"]["placements"] == corral["placements"]
    tenants = report["tenants"]
    assert tenants is not None
    assert tenants["tenants"] == 4 and tenants["admitted"] == 4 and tenants["admissions_per_s"] > 0
    assert sum(size["tenants"] for size in tenants["by_size"].values()) == 4
    assert tenants["waiting"] == 1 and tenants["queued_admitted"] == 1 and tenants["errors"] == 0
    inside, beside = report["phases"]["tenants"], report["phases"]["tenants_root"]
    assert inside["placements"] > 0 and beside["placements"] > 0
    assert inside["seconds"] == pytest.approx(beside["seconds"]) == pytest.approx(TINY.duration, rel=0.05)
    inside_cpu = next(goal for goal in report["targets"] if goal["name"] == "inside_cpu")
    assert f"vs {beside['costs']['mesh_us']:,.0f} us at the root" in inside_cpu["measured"]  # not the corral phase's
    assert asyncio.run(_virtual_clusters(mesh.nats_url)) == []  # `floor` and `fixed_rate` found the root bare
    text = format_report(report)
    assert "Aggregated" in text
    assert "targets:" in text
    assert "== virtual clusters: 4/4 tenants admitted over the bus" in text


@pytest.mark.integration
@pytest.mark.bench
def test_the_floor_driven_from_several_processes_is_measured_as_one(mesh: Mesh) -> None:
    """Two generator and two decider processes: their requests add up in one floor phase, each process's CPU shown."""
    config = dataclasses.replace(TINY, users=4, floor_processes=2, fixed_duration=0.0, tenants=0)
    report = asyncio.run(run_load(config, mesh.nats_url, mesh_pids(mesh), clean_up=False))

    floor = report["phases"]["floor"]
    assert floor["placements"] > 0 and floor["errors"] == 0 and floor["users"] == 4
    assert floor["decider"] is not None and floor["decider"]["requests"] >= floor["requests"]
    assert {"floor-generator-0", "floor-generator-1", "floor-decider-0", "floor-decider-1"} <= set(floor["cpu"])
    assert_ordered(floor["latency_ms"])
    assert floor["rows"][-1]["requests"] == floor["requests"]


@pytest.mark.integration
@pytest.mark.bench
def test_a_run_in_batches_counts_every_request_and_the_floor_answers_batches(mesh: Mesh) -> None:
    """`--batch 10`: users send ten submits (and up to ten removals) per corral.req.batch message; each request
    counts as one, removals included, and the floor's no-op decider answers the same batches."""
    config = dataclasses.replace(
        TINY, nodes=50, users=4, duration=2.0, warmup=0.0, floor_processes=1, fixed_duration=0.0, tenants=0, batch=10
    )
    report = asyncio.run(run_load(config, mesh.nats_url, mesh_pids(mesh), clean_up=False))

    assert list(report["phases"]) == ["corral", "floor"]
    corral, floor = report["phases"]["corral"], report["phases"]["floor"]
    for figures in (corral, floor):
        assert figures["batch"] == 10
        assert figures["placements"] > 0 and figures["errors"] == 0, figures["first_error"]
        decided = figures["placements"] + figures["pending"]
        assert figures["requests"] == decided + figures["removes"]
        # one removal per placement beyond the hold, each counted: a user holds at most hold + batch, and one batch
        # of its submits may fall after the window
        assert decided - config.users * (config.hold + 2 * config.batch) <= figures["removes"] <= decided
        assert_ordered(figures["latency_ms"])
    assert corral["placements"] > 2 * config.users * (config.hold + 2 * config.batch)  # counted per message: fails
    decider = floor["decider"]
    assert decider is not None and decider["request_batches"] > 0
    assert decider["requests"] >= floor["requests"] and decider["messages"] * 5 <= decider["requests"]
    text = format_report(report)
    assert (
        "== corral: the Corral scheduler, through corral.req.batch (4 users, closed loop, batches of 10 requests"
        in text
    )


def test_the_floor_users_are_shared_out_with_ids_of_their_own() -> None:
    """Five users over two processes: three and two, distinct tags and seeds, an open loop's rate halved."""
    drive = Drive(tag="t", users=5, seconds=1.0, warmup=0.0, hold=1, seed=7, rate=100.0)
    split = shares(drive, 2)
    assert [(part.users, part.rate) for part in split] == [(3, 50.0), (2, 50.0)]
    assert len({part.tag for part in split}) == len({part.seed for part in split}) == 2
    assert [part.users for part in shares(drive, 8)] == [1, 1, 1, 1, 1]


@pytest.mark.integration
def test_the_command_prints_one_json_object_against_a_running_mesh(
    mesh: Mesh, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--nats-url", mesh.nats_url, "--json", "--quiet", "--nodes", "20", "--users", "2", "--duration", "1"]
    argv += ["--floor-duration", "0", "--fixed-duration", "0", "--warmup", "0.2", "--connections", "1"]
    argv += ["--tenants", "0", "--autoscaler-duration", "0"]

    assert main(argv) == 0

    report = json.loads(capsys.readouterr().out)
    assert report["embedded_mesh"] is False
    assert report["core"] == ""  # which build an external mesh runs is not known from here
    assert list(report["phases"]) == ["corral"]
    assert report["phases"]["corral"]["placements"] > 0
    assert_ordered(report["phases"]["corral"]["latency_ms"])
    assert [goal["met"] for goal in report["targets"]][1:4] == [None, None, None]
    assert report["phases"]["corral"]["costs"]["mesh_us"] is None  # no process of the mesh is known from outside
    assert report["tenants"] is None


@pytest.mark.integration
@pytest.mark.bench
def test_the_autoscaler_phase_grows_the_cluster_for_the_users_and_scales_it_down(
    mesh: Mesh, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a mesh of its own with the autoscaler: nodes launched for the users' work, used, and gone after."""
    argv = ["--nats-url", mesh.nats_url, "--json", "--quiet", "--nodes", "20", "--users", "2", "--duration", "1"]
    argv += ["--floor-duration", "0", "--fixed-duration", "0", "--warmup", "0.2", "--connections", "1"]
    argv += ["--tenants", "0", "--autoscaler-duration", "2"]

    assert main(argv) == 0

    report = json.loads(capsys.readouterr().out)
    assert list(report["phases"]) == ["corral", "autoscaler"]
    users = report["phases"]["autoscaler"]
    assert users["users"] == USERS and users["requests"] > 0 and users["errors"] == 0
    assert [row["name"] for row in users["rows"]] == ["autoscaled_cpu", "autoscaled_gpu", "remove_actor", "Aggregated"]
    figures = report["autoscaler"]
    assert 0 < figures["launched"] == figures["registered"] == figures["with_work"]
    assert figures["launches_failed"] == 0 and figures["idle_with_demand"] == []
    assert all(figures["peak"][name] <= most for name, most in figures["max_workers"].items())
    assert figures["peak"][GPU_TYPE] > 0, "the tolerating GPU work got a GPU node"
    assert figures["actors"] > 0 and figures["still_pending"] == 0
    assert figures["growth_s"] > 0 and figures["placements_per_s"] > 0
    for delays in (figures["pending_to_launch_ms"], figures["pending_to_placed_ms"]):
        assert delays["actors"] > 0 and 0 <= delays["p50"] <= delays["p99"]
    assert figures["scale_down_s"] is not None
    assert (figures["final_nodes"], figures["final_launched"]) == (EXISTING_NODES, 0)
    checks = [goal for goal in report["targets"] if goal["name"].startswith("autoscaler_")]
    assert [goal["met"] for goal in checks] == [True] * 5


@pytest.mark.parametrize(
    ("values", "fraction", "expected"),
    [
        ([], 0.99, 0.0),
        ([5.0], 0.5, 5.0),
        ([1.0, 2.0, 3.0, 4.0], 0.5, 2.0),
        ([float(i) for i in range(1, 101)], 0.99, 99.0),
    ],
    ids=["no values give 0", "one value is every percentile", "the median is the lower middle", "p99 of 1..100 is 99"],
)
def test_percentile_is_nearest_rank(values: list[float], fraction: float, expected: float) -> None:
    assert percentile(values, fraction) == expected


@pytest.mark.parametrize(
    ("phases", "verdicts"),
    [
        (
            {
                "corral": phase("corral", 2500),
                "floor": phase("floor", 4000),
                "fixed_rate": phase("f", 1250, mode="open"),
            },
            [True, True, True, None],
        ),
        (
            {
                "corral": phase("corral", 1000),
                "floor": phase("floor", 4000),
                "fixed_rate": phase("f", 500, p99=150.0),
                "tenants": phase("tenants", 600),
            },
            [False, False, False, False],
        ),
        ({"corral": phase("corral", 2500), "tenants": phase("tenants", 2000)}, [True, None, None, True]),
        (
            {"corral": phase("corral", 800, mode="open"), "floor": phase("floor", 800, mode="open")},
            [None, None, True, None],
        ),
    ],
    ids=[
        "every target met",
        "every target missed",
        "phases that did not run are not measured",
        "an open loop below the target judges only p99",
    ],
)
def test_targets_are_judged_from_the_phases(phases: dict[str, Phase], verdicts: list[bool | None]) -> None:
    share, found = goals(phases)
    assert [goal["met"] for goal in found] == verdicts
    assert (share is None) == ("floor" not in phases)


def test_cpu_per_placement_splits_the_serial_path_from_the_mesh_and_the_load() -> None:
    """A quarter of a core at 1,000 placements/s is 250 us per placement; the generator counts in neither."""
    cpu = {"scheduler": 0.025, "nats-server": 0.05, "labels": 0.01, "loadtest": 0.2, "floor-generator-0": 0.1}
    costs = costs_of(cpu, 1000.0, 2000.0)
    assert costs["serial_us"] == 25.0
    assert costs["projection_per_s"] == 40_000
    assert costs["mesh_us"] == 85.0
    assert (costs["serial_request_us"], costs["mesh_request_us"]) == (12.5, 42.5)  # the unit of the targets
    assert costs["per_request_us"]["scheduler"] == 12.5
    assert costs["serial_per_load"] == round(12.5 / 150.0, 2)  # the generator's processes: 100 + 50 us per request
    assert costs_of(cpu, 1000.0, 2000.0, serial=False)["serial_us"] is None
    assert costs_of(cpu, 1000.0, 2000.0, serial=False)["serial_per_load"] is None
    assert costs_of({"scheduler": 0.025}, 1000.0, 2000.0)["serial_per_load"] is None  # no generator measured
    assert costs_of(cpu, 0.0, 0.0)["mesh_us"] is None
    text = "\n".join(cost_lines(costs))
    assert (
        "serial path (scheduler) 25 us/placement (12)   projection 40,000 placements/s   x0.08 the load generator's   "
        "mesh 85 us/placement (42)" in text
    )


def test_the_text_report_says_met_or_not_met() -> None:
    phases = {"corral": phase("corral", 1000), "floor": phase("floor", 1500)}
    share, targets = goals(phases)
    report = report_of(targets, floor_share=share)
    lines = [re.split(r"\s{2,}", line.strip()) for line in format_report(report).splitlines()]
    verdicts = {parts[-1]: parts[0] for parts in lines}
    assert verdicts["durable placements/s >= 2,000: 1,000/s"] == "not met"
    assert verdicts["placements/s >= 50% of the bus floor: 1,000 / 1,500 = 67%"] == "met"
    assert verdicts["p99 submit-to-placed <= 100 ms at half rate: not run"] == "not measured"


def test_the_report_says_which_build_of_the_core_the_embedded_mesh_ran() -> None:
    """Figures of the sources and of the compiled core differ by half: a report names the build it measured."""
    report = report_of([Goal(name="throughput", goal="durable placements/s >= 2,000", measured="1/s", met=False)])
    report["core"] = "compiled"
    assert "1 replica(s), the core's compiled build" in format_report(report).splitlines()[1]
    report["embedded_mesh"], report["core"] = False, ""
    assert format_report(report).splitlines()[1].endswith("1 replica(s)")
