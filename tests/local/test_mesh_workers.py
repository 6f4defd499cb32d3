"""How many decision workers an embedded mesh starts: `CORRAL_DECISION_WORKERS`, checked before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.local.mesh import decision_workers, start_mesh
from services.runtime.settings import SettingsError


def test_the_mesh_runs_no_worker_unless_asked_and_reads_no_other_setting() -> None:
    assert decision_workers({}) == 0
    assert decision_workers({"CORRAL_DECISION_WORKERS": "3", "CORRAL_SEED": "nan"}) == 3


@pytest.mark.parametrize("value", ["65", "-1", "two", "1.5"])
def test_a_bad_worker_count_names_the_variable_the_value_and_the_rule_before_any_server_starts(
    value: str, tmp_path: Path
) -> None:
    with pytest.raises(SettingsError, match=f"CORRAL_DECISION_WORKERS '{value}': must be"):
        start_mesh(tmp_path / "mesh", settings={"CORRAL_DECISION_WORKERS": value})
    assert not (tmp_path / "mesh").exists()
