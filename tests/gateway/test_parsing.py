"""The gateway's request pieces: proposal 002's taint bodies and the `?selector=` grammar."""

from __future__ import annotations

import pytest

from schemas import Taint
from services.core.errors import RejectedError
from services.gateway.parsing import removals_of, selector_of, taints_of


def test_a_taint_value_defaults_to_noschedule_and_a_suffix_picks_the_effect() -> None:
    assert taints_of({"gpu_node": "true", "drain": "soon:NoExecute", "bare": ":PreferNoSchedule"}) == [
        Taint("gpu_node", "true", "NoSchedule"),
        Taint("drain", "soon", "NoExecute"),
        Taint("bare", "", "PreferNoSchedule"),
    ]


@pytest.mark.parametrize(
    ("body", "named"),
    [({}, "at least one taint"), ({"gpu": "true:Sometimes"}, "'true:Sometimes'")],
    ids=["empty", "unknown effect"],
)
def test_a_taint_body_that_names_no_taint_or_an_unknown_effect_is_refused(body: dict[str, str], named: str) -> None:
    with pytest.raises(RejectedError, match=named):
        taints_of(body)


def test_a_delete_body_names_one_effect_per_key_or_every_effect() -> None:
    assert removals_of({"gpu_node": "true", "drain": "soon:NoExecute", "bare": ":PreferNoSchedule"}) == {
        "gpu_node": None,
        "drain": "NoExecute",
        "bare": "PreferNoSchedule",
    }
    with pytest.raises(RejectedError, match="'x:Never'"):
        removals_of({"gpu": "x:Never"})


def test_a_selector_splits_on_the_commas_outside_parentheses() -> None:
    assert selector_of("disk=in(ssd,nvme), gpu=exists(),zone=!z1") == {
        "disk": "in(ssd,nvme)",
        "gpu": "exists()",
        "zone": "!z1",
    }
    assert selector_of("") == {}


@pytest.mark.parametrize("text", ["disk", "disk=in(", "disk=a,disk=b", "Bad Key=1"])
def test_a_selector_entry_that_breaks_the_grammar_is_refused_naming_it(text: str) -> None:
    with pytest.raises(RejectedError):
        selector_of(text)
