"""Every number of a message is checked against its type's bounds, by path, before it is sent (pure)."""

from __future__ import annotations

import math

import pytest

from schemas import FixedSizeNode, FixedSizeNodes, PlacementGroupRequest, ScheduleRequest, VirtualCluster
from schemas.commands import CreatePlacementGroup, CreateVirtualCluster, SchedulerRequest, SubmitActor
from services.core.amounts import check_amounts
from services.core.errors import RejectedError


@pytest.mark.parametrize(
    ("message", "says"),
    [
        (SubmitActor(request=ScheduleRequest("a", {"CPU": math.nan})), "request.resources['CPU'] nan"),
        (SubmitActor(request=ScheduleRequest("a", {"CPU": -math.inf})), "request.resources['CPU'] -inf"),
        (
            CreatePlacementGroup(
                request=PlacementGroupRequest("g", [{"CPU": 1}], fallback_strategy=[{"bundles": [{"GPU": math.inf}]}])
            ),
            "request.fallback_strategy[0].bundles[0]['GPU'] inf",
        ),
        (
            CreateVirtualCluster(
                vc_id="v", spec=VirtualCluster(fixed_size_nodes=[FixedSizeNodes([FixedSizeNode({"CPU": -1})])])
            ),
            "spec.fixed_size_nodes[0].nodes[0].resources['CPU'] -1",
        ),
    ],
)
def test_an_amount_that_is_not_finite_or_negative_is_named_by_its_path(message: object, says: str) -> None:
    with pytest.raises(RejectedError, match="must be a finite number >= 0") as refused:
        check_amounts(message)
    assert str(refused.value).startswith(says)


def test_integers_name_their_own_rule_and_unbounded_numbers_pass() -> None:
    with pytest.raises(RejectedError, match=r"request.max_restarts -2: must be an integer >= -1"):
        check_amounts(SubmitActor(request=ScheduleRequest("a", max_restarts=-2)))
    check_amounts(SubmitActor(request=ScheduleRequest("a", {"CPU": 0, "GPU": 1e300}, priority=-5, max_restarts=-1)))


def test_plain_json_values_are_checked_against_the_member_their_tag_names() -> None:
    plain = {"kind": "schedule", "request": {"actor_id": "a", "resources": {"CPU": -2}}}
    with pytest.raises(RejectedError, match=r"^request.resources\['CPU'\] -2"):
        check_amounts(plain, SchedulerRequest)
    check_amounts({"kind": "remove_actor", "actor_id": "a", "request": {"resources": {"CPU": -2}}}, SchedulerRequest)
