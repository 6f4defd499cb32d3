"""The `corral` command: help, the demo, and small runs of the core benchmark (figures are printed, not judged)."""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.cli import __main__ as cli_main
from services.cli.__main__ import main
from services.cli.bench import core as bench_core
from services.cli.commands import bench

REQUIRED_KEYS = ("workload", "nodes", "placed_before", "decisions_per_s", "p50_us", "p99_us", "peak_rss_mb")


def json_lines(text: str) -> list[dict[str, object]]:
    """Every non-blank line of `text`, parsed as one JSON object."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_help_lists_the_demo_and_bench_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "demo" in out
    assert "bench" in out


@pytest.mark.parametrize(
    "argv",
    [["--frobnicate"], ["demo", "--frobnicate"], ["bench"], ["bench", "gpu"], ["bench", "core", "--sizes", "x"]],
    ids=[
        "an unknown option is a usage error",
        "an unknown option of demo is a usage error",
        "bench without a benchmark is a usage error",
        "an unknown benchmark is a usage error",
        "sizes that are not numbers are a usage error",
    ],
)
def test_bad_command_lines_exit_with_status_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert "usage: corral" in capsys.readouterr().err


def test_the_demo_prints_placements_and_pending_explanations(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "ACTOR          NODE       ZONE  WHY" in out
    assert "0/" in out
    assert "untolerated taint" in out
    assert "didn't satisfy existing actors' anti-affinity rules" in out
    assert "STRICT_SPREAD needs 10 distinct nodes" in out


def test_the_demo_prints_the_same_thing_every_run(capsys: pytest.CaptureFixture[str]) -> None:
    main(["demo"])
    first = capsys.readouterr().out
    main(["demo"])
    assert capsys.readouterr().out == first


def assert_figures(results: list[dict[str, object]], workloads: list[str], nodes: int) -> None:
    """One line per workload, every required key, and positive figures."""
    assert [result["workload"] for result in results] == workloads
    for result in results:
        assert set(REQUIRED_KEYS) <= set(result)
        assert result["nodes"] == nodes
        assert result["placed_before"] == nodes * 10
        for key in REQUIRED_KEYS[2:]:
            value = result[key]
            assert isinstance(value, int | float)
            assert value > 0, key


def test_bench_core_in_process_prints_a_json_line_per_case(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "bench",
        "core",
        "-o",
        "json",
        "--sizes",
        "200",
        "--workloads",
        "plain,pg_strict_spread",
        "--decisions",
        "50",
    ]
    assert main([*argv, "--in-process"]) == 0
    assert_figures(json_lines(capsys.readouterr().out), ["plain", "pg_strict_spread"], 200)


def test_bench_core_runs_each_case_in_its_own_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["bench", "core", "-o", "json", "--sizes", "50", "--workloads", "anti_affinity_node", "--decisions", "20"])
        == 0
    )
    assert_figures(json_lines(capsys.readouterr().out), ["anti_affinity_node"], 50)


def test_bench_core_prints_a_table_without_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "core", "--sizes", "50", "--workloads", "taints", "--decisions", "20", "--in-process"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "DECISIONS/S" in out
    assert "taints" in out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["up", "--data-dir"], "corral up: error: --data-dir {path}: cannot use it as a directory ("),
        (["schema", "export", "--out"], "corral schema export: error: --out {path}: cannot write there ("),
    ],
)
def test_a_file_where_a_directory_should_be_is_refused_in_one_line(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "a-file"
    path.write_text("not a directory\n")
    assert main([*argv, str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(says.format(path=path)) and len(err.splitlines()) == 1, err
    assert path.read_text() == "not a directory\n"


@pytest.mark.parametrize(
    ("package", "registered"),
    [("services.cli.commands", cli_main.COMMANDS), ("services.cli.bench", bench.BENCHMARKS)],
    ids=["every command module is a command of corral", "every benchmark module with parsers is a benchmark"],
)
def test_every_module_that_adds_parsers_is_registered(package: str, registered: tuple[object, ...]) -> None:
    modules = [
        importlib.import_module(f"{package}.{info.name}")
        for info in pkgutil.iter_modules(importlib.import_module(package).__path__)
    ]
    commands = {module.__name__ for module in modules if hasattr(module, "add_parsers")}
    assert commands == {module.__name__ for module in registered if isinstance(module, ModuleType)}


def test_bench_autoscaler_prints_milliseconds_per_round_beside_the_target(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "autoscaler", "--nodes", "200", "--pending", "400", "--shapes", "20", "--types", "5"]
    assert main([*argv, "--rounds", "2"]) == 0
    out = capsys.readouterr().out
    assert "400 pending requests in 20 shapes, 5 node types, 200 existing nodes" in out
    assert "ms per round" in out
    assert "target <= 200 ms" in out


def test_bench_autoscaler_json_has_the_figures(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "autoscaler", "-o", "json", "--nodes", "50", "--pending", "100", "--shapes", "10", "--types", "3"]
    assert main([*argv, "--rounds", "1"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert (figures["nodes"], figures["pending"], figures["target_ms"]) == (50, 100, 200.0)
    assert figures["demand_groups"] == 10


def test_bench_core_evicts_the_caches_before_every_nth_decision_when_asked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--evict-mb 1 --evict-every 4` writes the scratch memory before decisions 0, 4 and 8 of 10; without
    `--evict-mb`, never."""
    sizes: list[int] = []
    monkeypatch.setattr(bench_core, "evict", lambda scratch: sizes.append(len(scratch)))
    argv = ["bench", "core", "-o", "json", "--sizes", "50", "--workloads", "plain", "--decisions", "10", "--in-process"]
    assert main([*argv, "--evict-mb", "1", "--evict-every", "4"]) == 0
    assert sizes == [1 << 20] * 3
    assert main(argv) == 0
    assert sizes == [1 << 20] * 3
    assert_figures(json_lines(capsys.readouterr().out), ["plain", "plain"], 50)


@pytest.mark.parametrize(
    ("value", "says"),
    [("5000", "'5000': must be 0 to 4,096 megabytes"), ("-1", "'-1': expected a whole number >= 0")],
)
def test_bench_core_refuses_an_eviction_it_could_not_hold_naming_the_option(
    value: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["bench", "core", "--evict-mb", value])
    assert stopped.value.code == 2
    assert f"corral bench core: error: argument --evict-mb: {says}" in capsys.readouterr().err


@given(st.one_of(st.text(max_size=30), st.integers(-(10**30), 10**30).map(str)))
def test_any_evict_mb_text_is_a_megabyte_count_within_the_limit_or_refused_naming_it(text: str) -> None:
    try:
        megabytes = bench_core._megabytes(text)
    except argparse.ArgumentTypeError as refused:
        assert repr(text) in str(refused)
    else:
        assert 0 <= megabytes <= bench_core.MOST_EVICTED_MB
        assert megabytes == int(text)
