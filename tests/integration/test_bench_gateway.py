"""`corral bench gateway` starts a mesh with the gateway and prints the HTTP and client figures side by side."""

from __future__ import annotations

import json

import pytest

from services.cli.__main__ import main

pytestmark = [pytest.mark.integration, pytest.mark.bench]


def test_bench_gateway_reports_the_four_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "gateway", "--nodes", "20", "--seconds", "1", "--workers", "2", "-o", "json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert (figures["nodes"], figures["workers"], figures["seconds"]) == (20, 2, 1)
    rows = {(row["operation"], row["via"]): row for row in figures["rows"]}
    assert set(rows) == {(op, via) for op in ("list nodes", "submit") for via in ("http", "client")}
    for row in rows.values():
        assert row["requests"] > 0
        assert row["requests_per_s"] > 0
        assert 0 < row["p50_ms"] <= row["p99_ms"]


def test_bench_gateway_prints_a_table_without_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "gateway", "--nodes", "5", "--seconds", "1", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "5 nodes, 1 workers, 1 s per measurement" in out
    assert "list nodes (GET /api/v1/nodes)" in out
    assert "submit (POST /api/v1/actors)" in out
