"""The `vclusters` case of `corral bench core`: tiny runs give consistent figures (printed, never judged on time)."""

from __future__ import annotations

import json

import pytest

from services.cli.__main__ import main
from services.cli.bench.core import plan_cases
from services.cli.bench.vclusters import FILL, SIZE_CLASSES, make_slots

NODES, TENANTS, CHURN, DECISIONS = 60, 5, 20, 40
TINY = ["--sizes", str(NODES), "--tenants", str(TENANTS), "--churn", str(CHURN), "--decisions", str(DECISIONS)]
RATES = (
    "decisions_per_s",
    "root_decisions_per_s",
    "admissions_per_s",
    "churn_admissions_per_s",
    "churn_ops_per_s",
    "inside_cost_vs_root",
)


def only_line(text: str) -> dict[str, object]:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    parsed = json.loads(lines[0])
    assert isinstance(parsed, dict)
    return parsed


def check_figures(figures: dict[str, object]) -> None:
    """Every figure is there, positive where it is a rate, and the counts add up."""
    assert figures["workload"] == "vclusters"
    assert figures["nodes"] == NODES
    assert figures["placed_before"] == NODES * 10
    assert figures["tenants"] == TENANTS
    for key in (*RATES, "p50_us", "p99_us", "root_p50_us", "root_p99_us", "create_p50_us", "destroy_p50_us"):
        value = figures[key]
        assert isinstance(value, int | float) and value > 0, key
    queued_after = round(TENANTS / 2)
    assert figures["requested"] == TENANTS + queued_after + CHURN
    assert figures["destroyed"] == CHURN
    assert figures["pending_inside"] == figures["pending_root"] == 0
    admissions, still_queued = figures["admissions"], figures["still_queued"]
    assert isinstance(admissions, int) and isinstance(still_queued, int)
    assert admissions + still_queued == figures["requested"], "every request is admitted or still waits"
    waits = figures["wait"]
    assert isinstance(waits, dict) and set(waits) == set(SIZE_CLASSES)
    fill_admitted = figures["fill_admitted"]
    assert isinstance(fill_admitted, int) and 0 < fill_admitted <= TENANTS
    measured = sum(wait["admitted"] for wait in waits.values())
    assert 0 < measured <= admissions - fill_admitted, "waits count the clusters requested after the fill"
    assert sum(wait["waited"] for wait in waits.values()) <= figures["admitted_from_queue"]
    assert figures["admitted_from_queue"] or still_queued, "demand above capacity makes some clusters wait"
    for wait in waits.values():
        assert 0 <= wait["waited"] <= wait["admitted"]
        assert 0 <= wait["ops_p50"] <= wait["ops_p99"]
        assert 0 <= wait["ms_p50"] <= wait["ms_p99"]
    assert waits["large"]["admitted"] > 0


def test_the_vclusters_case_in_process_prints_one_json_line_with_consistent_figures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "core", "-o", "json", "--workloads", "vclusters", *TINY, "--in-process"]) == 0
    check_figures(only_line(capsys.readouterr().out))


def test_the_vclusters_case_in_its_own_process_gets_the_tenants_and_churn(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "core", "-o", "json", "--workloads", "vclusters", *TINY]) == 0
    check_figures(only_line(capsys.readouterr().out))


def test_the_table_shows_admissions_waits_and_the_inside_vs_root_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "core", "--workloads", "vclusters", *TINY, "--in-process"]) == 0
    out = capsys.readouterr().out
    assert "DECISIONS/S" in out
    assert "admissions/s:" in out
    assert "the root (target <= 1.5)" in out
    for name in SIZE_CLASSES:
        assert f"    {name}" in out


def test_vclusters_runs_at_1000_nodes_unless_sizes_are_given() -> None:
    assert plan_cases(["plain", "vclusters"], None) == [
        ("plain", 1000),
        ("vclusters", 1000),
        ("plain", 5000),
        ("plain", 20000),
    ]
    assert plan_cases(["vclusters", "plain"], [200, 50]) == [
        ("vclusters", 200),
        ("plain", 200),
        ("vclusters", 50),
        ("plain", 50),
    ]


def test_a_negative_churn_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["bench", "core", "--workloads", "vclusters", "--churn", "-1"])
    assert exited.value.code == 2
    assert "--churn" in capsys.readouterr().err


def test_tenant_specs_mix_classes_policies_and_group_sizes_and_fill_the_asked_share() -> None:
    free = 1000 * 54.0
    slots = make_slots(300, 200, free)
    classes = [slot.size_class for slot in slots]
    assert (classes.count("small"), classes.count("medium"), classes.count("large")) == (150, 105, 45)
    tenants_minimum = sum(slot.minimum for slot in slots[:200])
    assert 0.9 * FILL * free <= tenants_minimum <= 1.1 * FILL * free
    policies = {group.scheduling_policy for slot in slots for group in slot.spec.fixed_size_nodes}
    assert policies == {"PACK", "SPREAD", "STRICT_SPREAD"}
    sizes = {len(group.nodes) for slot in slots for group in slot.spec.fixed_size_nodes}
    assert sizes == {1, 2, 3, 4}
    for slot in slots:
        spec = slot.spec
        assert spec.flexible_resource_max["CPU"] > spec.flexible_resource_min["CPU"] >= 0
        fixed = sum(node.resources["CPU"] for group in spec.fixed_size_nodes for node in group.nodes)
        assert slot.minimum == fixed + spec.flexible_resource_min["CPU"]
    by_class = {name: [s.minimum for s in slots if s.size_class == name] for name in SIZE_CLASSES}
    assert max(by_class["small"]) < min(by_class["medium"]) <= max(by_class["medium"]) < min(by_class["large"])
    assert make_slots(300, 200, free) == slots, "the specs are the same every run"
