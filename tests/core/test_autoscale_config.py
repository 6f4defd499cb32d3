"""The autoscaler's configuration file: the documented example parses; every bad field is refused with its rule."""

from __future__ import annotations

import pytest

from schemas import Taint
from services.core.autoscale import NodeType, ProviderConfig, parse_config
from services.core.errors import RejectedError

ISSUE_EXAMPLE = """
provider: {type: local}        # or {type: command, launch: "...", terminate: "..."}
idle_timeout_s: 60
upscaling_speed: 1.0           # per round, launch at most max(5, speed * running) nodes
launch_timeout_s: 120
node_types:
  cpu-4:
    resources: {CPU: 4}
    labels: {type: 4c8g, zone: usa-1}
    min_workers: 0
    max_workers: 50
  gpu-a100:
    resources: {CPU: 16, GPU: 4}
    labels: {accelerator-type: A100}
    taints: {gpu_node: "true"}          # key: value (NoSchedule) or key: "value:Effect"
    min_workers: 0
    max_workers: 8
    cost: 10                            # optional; the planner prefers the cheapest type that serves
"""


GOOD_TYPE = "    resources: {CPU: 4}\n    max_workers: 3\n"
ONE_TYPE = "node_types: {t: {resources: {CPU: 1}, max_workers: 1}}"


def test_the_issues_example_parses_into_typed_node_types() -> None:
    config = parse_config(ISSUE_EXAMPLE)
    assert config.provider == ProviderConfig("local")
    assert (config.idle_timeout_s, config.upscaling_speed, config.launch_timeout_s) == (60.0, 1.0, 120.0)
    assert config.node_types == {
        "cpu-4": NodeType("cpu-4", {"CPU": 4.0}, {"type": "4c8g", "zone": "usa-1"}, (), 0, 50, 1.0),
        "gpu-a100": NodeType(
            "gpu-a100",
            {"CPU": 16.0, "GPU": 4.0},
            {"accelerator-type": "A100"},
            (Taint("gpu_node", "true"),),
            0,
            8,
            10.0,
        ),
    }


def test_a_taint_may_name_its_effect_and_defaults_apply() -> None:
    config = parse_config(
        "node_types:\n  t:\n    resources: {CPU: 1}\n    max_workers: 2\n"
        '    taints: {a: "x:NoExecute", b: "y:PreferNoSchedule", c: ""}\n'
    )
    node_type = config.node_types["t"]
    assert node_type.taints == (Taint("a", "x", "NoExecute"), Taint("b", "y", "PreferNoSchedule"), Taint("c", ""))
    assert (node_type.min_workers, node_type.cost, config.provider.type) == (0, 1.0, "local")


def test_the_command_provider_keeps_its_command_lines() -> None:
    text = f"provider: {{type: command, launch: ./up.sh, terminate: ./down.sh}}\n{ONE_TYPE}"
    assert parse_config(text).provider == ProviderConfig("command", "./up.sh", "./down.sh")


BAD = [
    ("not: [valid", "not valid YAML"),
    ("- a list", "the configuration ['a list']: must be a mapping"),
    ("provider: {type: local}", "node_types None: is required"),
    ("node_types: {}", "node_types {}: must name at least one node type"),
    ("nodes_types: {}", "the configuration key 'nodes_types': is unknown"),
    (
        "provider: {type: cloud}\n" + ONE_TYPE,
        "provider.type 'cloud': must be one of local, command",
    ),
    (
        "provider: {type: command, launch: x}\n" + ONE_TYPE,
        "provider.terminate '': must be a non-empty command line",
    ),
    (
        "provider: {type: local, launch: x}\n" + ONE_TYPE,
        "provider.launch 'x': is only for provider type 'command'",
    ),
    (
        "idle_timeout_s: 0\n" + ONE_TYPE,
        "idle_timeout_s 0: must be a number > 0",
    ),
    (
        "upscaling_speed: fast\n" + ONE_TYPE,
        "upscaling_speed 'fast': must be a finite number",
    ),
    (
        "launch_timeout_s: -1\n" + ONE_TYPE,
        "launch_timeout_s -1: must be a number > 0",
    ),
    ("node_types:\n  Bad Name!:\n" + GOOD_TYPE, "node_types.Bad Name! 'Bad Name!'"),
    (
        "node_types:\n  t:\n    resources: {}\n    max_workers: 1\n",
        "node_types.t.resources {}: must give the node some resource",
    ),
    (
        "node_types:\n  t:\n    resources: {CPU: -1}\n    max_workers: 1\n",
        "node_types.t.resources['CPU'] -1: must be a finite number >= 0",
    ),
    ("node_types:\n  t:\n    resources: {CPU: 1}\n", "node_types.t.max_workers None: is required"),
    (
        "node_types:\n  t:\n    resources: {CPU: 1}\n    max_workers: 1\n    min_workers: 2\n",
        "node_types.t.max_workers 1: must be >= min_workers (2)",
    ),
    (
        "node_types:\n  t:\n    resources: {CPU: 1}\n    max_workers: 1.5\n",
        "node_types.t.max_workers 1.5: must be a whole number >= 0",
    ),
    (
        "node_types:\n  t:\n    resources: {CPU: 1}\n    max_workers: 1\n    cost: -2\n",
        "node_types.t.cost -2: must be a number >= 0",
    ),
    ("node_types:\n  t:\n" + GOOD_TYPE + "    max_worker: 3\n", "node_types.t key 'max_worker': is unknown"),
    (
        "node_types:\n  t:\n" + GOOD_TYPE + "    labels: {gpu: true}\n",
        "node_types.t.labels['gpu'] True: must be a string",
    ),
    (
        "node_types:\n  t:\n" + GOOD_TYPE + "    labels: {corral.io/node-type: x}\n",
        "the prefix 'corral.io/' is reserved",
    ),
    ("node_types:\n  t:\n" + GOOD_TYPE + "    labels: {'bad key!': x}\n", "node_types.t.labels: label key 'bad key!'"),
    (
        "node_types:\n  t:\n" + GOOD_TYPE + "    taints: {gpu_node: true}\n",
        "node_types.t.taints['gpu_node'] True: must be a string",
    ),
    (
        "node_types:\n  t:\n" + GOOD_TYPE + "    taints: {gpu_node: 'true:Sometimes'}\n",
        "node_types.t.taints['gpu_node'] 'true:Sometimes': effect must be one of",
    ),
    ("node_types:\n  t:\n" + GOOD_TYPE + "    taints: {'bad key!': x}\n", "node_types.t.taints: label key 'bad key!'"),
]


@pytest.mark.parametrize(
    ("text", "expected"),
    BAD,
    ids=[
        "text that is not YAML is refused",
        "a document that is not a mapping is refused",
        "a configuration without node_types is refused",
        "an empty node_types is refused",
        "an unknown top-level key is refused",
        "an unknown provider type is refused",
        "the command provider needs both command lines",
        "the local provider takes no command lines",
        "a zero idle timeout is refused",
        "a non-numeric upscaling speed is refused",
        "a negative launch timeout is refused",
        "a type name that is no label value is refused",
        "a type without resources is refused",
        "a negative resource is refused",
        "a type without max_workers is refused",
        "max_workers below min_workers is refused",
        "a fractional max_workers is refused",
        "a negative cost is refused",
        "an unknown node-type key is refused",
        "an unquoted boolean label value is refused",
        "a system label on a type is refused",
        "a bad label key is refused",
        "an unquoted boolean taint value is refused",
        "an unknown taint effect is refused",
        "a bad taint key is refused",
    ],
)
def test_a_bad_field_is_refused_naming_field_value_and_rule(text: str, expected: str) -> None:
    with pytest.raises(RejectedError) as refused:
        parse_config(text, "cluster.yaml")
    assert str(refused.value).startswith("cluster.yaml: ")
    assert expected in str(refused.value)
