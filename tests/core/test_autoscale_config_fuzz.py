"""Fuzz the autoscaler's configuration file: any text is a checked config or one RejectedError naming the file."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.autoscale import ScalingConfig, parse_config
from services.core.documents import MAX_DOCUMENT_BYTES
from services.core.errors import RejectedError, TooLargeError
from tests.core.test_autoscale_config import ISSUE_EXAMPLE
from tests.support.examples import examples

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(["NoSchedule", "true:NoExecute", "value:Never", "1e999", ".nan", "-.inf", "local", "command"]),
)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10) | SCALARS, inner, max_size=4),
    max_leaves=20,
)
PATHS = [
    ("provider",),
    ("provider", "type"),
    ("idle_timeout_s",),
    ("upscaling_speed",),
    ("launch_timeout_s",),
    ("node_types",),
    ("node_types", "cpu-4"),
    ("node_types", "cpu-4", "resources"),
    ("node_types", "cpu-4", "resources", "CPU"),
    ("node_types", "cpu-4", "labels"),
    ("node_types", "gpu-a100", "taints"),
    ("node_types", "gpu-a100", "taints", "gpu_node"),
    ("node_types", "gpu-a100", "min_workers"),
    ("node_types", "gpu-a100", "max_workers"),
    ("node_types", "gpu-a100", "cost"),
]


def with_value(document: dict[str, Any], path: tuple[str, ...], value: object) -> dict[str, Any]:
    """The documented example file with one field (at `path`) replaced by `value`."""
    place = document
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = value
    return document


def parses_or_refuses(text: str) -> None:
    """A checked config, or a RejectedError that names the file; nothing else escapes."""
    try:
        assert isinstance(parse_config(text, "fuzz.yaml"), ScalingConfig)
    except RejectedError as error:
        assert str(error).startswith("fuzz.yaml: ")


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from(PATHS), DOCUMENTS)
def test_the_issue_example_with_any_field_replaced_parses_or_is_refused_clearly(
    path: tuple[str, ...], value: object
) -> None:
    parses_or_refuses(yaml.safe_dump(with_value(yaml.safe_load(ISSUE_EXAMPLE), path, value)))


@settings(max_examples=examples(300), deadline=None)
@given(DOCUMENTS | st.text(max_size=200) | st.binary(max_size=200).map(lambda raw: raw.decode("latin-1")))
def test_any_document_or_text_parses_or_is_refused_clearly(document: object) -> None:
    parses_or_refuses(document if isinstance(document, str) else yaml.safe_dump(document))


@settings(max_examples=examples(50), deadline=None)
@given(st.integers(1, 4096), st.sampled_from(["#", " ", "x"]))
def test_a_file_past_the_size_limit_is_refused_naming_its_size_and_the_limit(over: int, padding: str) -> None:
    text = ISSUE_EXAMPLE + padding * (MAX_DOCUMENT_BYTES + over - len(ISSUE_EXAMPLE.encode()))
    with pytest.raises(TooLargeError) as refused:
        parse_config(text, "fuzz.yaml")
    assert (
        str(refused.value)
        == f"fuzz.yaml: {MAX_DOCUMENT_BYTES + over} bytes, over the {MAX_DOCUMENT_BYTES}-byte limit for this file"
    )


@settings(max_examples=examples(100), deadline=None)
@given(st.sampled_from(PATHS), DOCUMENTS)
def test_any_anchor_or_alias_in_a_file_is_refused(path: tuple[str, ...], value: object) -> None:
    document = with_value(yaml.safe_load(ISSUE_EXAMPLE), path, [value, value, value])
    text = yaml.safe_dump(document)  # a list or mapping met three times: an anchor and two aliases
    if re.search(r"&id\d+", text):  # PyYAML names its anchors id001, id002, ...
        with pytest.raises(TooLargeError, match="anchors and aliases"):
            parse_config(text, "fuzz.yaml")
    else:
        parses_or_refuses(text)
