"""The autoscaler's planner: which nodes it launches for pending work, and how it explains the demand."""

from __future__ import annotations

from schemas import ScheduleRequest
from tests.core.autoscale_builders import cluster, launched, plan_for


def test_pending_actors_get_the_cheapest_type_and_a_tolerated_gpu_actor_its_gpu_node() -> None:
    target = cluster()
    for index in range(3):
        target.submit(ScheduleRequest(f"a{index}", {"CPU": 1}))
    target.submit(ScheduleRequest("g", {"CPU": 1, "GPU": 1}, tolerations={"gpu_node": "exists()"}))
    result = plan_for(target)
    assert launched(result) == {"cpu-4": 1, "gpu-a100": 1}
    assert result.about("g") == "autoscaler: launching 1 gpu-a100 for this"


def test_an_untolerated_taint_and_a_missing_resource_are_the_reasons_per_type() -> None:
    target = cluster()
    target.submit(ScheduleRequest("g", {"CPU": 1, "GPU": 1}))
    result = plan_for(target)
    assert launched(result) == {}
    group = result.group_of("g")
    assert group is not None
    assert dict(group.reasons) == {
        "cpu-4": "lacks GPU",
        "cpu-16": "lacks GPU",
        "gpu-a100": "has untolerated taint {gpu_node: true}",
    }
