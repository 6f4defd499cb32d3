"""The kubectl-shaped CLI without a server: quantities, label and taint edits, selectors, help, version, completion,
and the tables `corral get` prints from a read of the mesh."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from importlib.metadata import version

import pytest

from schemas import Pending, Taint
from schemas.queries import ActorInfo, NodeInfo
from services.cli import args as types
from services.cli.__main__ import main
from services.cli.common import UsageError
from services.cli.edits import LabelEdit, label_edit, removals, taint_edit
from services.cli.listing import Snapshot, first_reason, node_status, select, table_of, totals
from services.cli.quantity import parse_quantity
from services.cli.records import age
from services.core.amounts import format_amount, format_quantity
from services.core.errors import NotFoundError, RejectedError
from services.core.labels import validate_label_key
from services.core.selectors import LabelSelector


def out_of(argv: list[str], capsys: pytest.CaptureFixture[str], status: int = 0) -> str:
    """stdout of `corral argv` (stderr when `status` is not 0; an argparse exit counts as its status)."""
    try:
        assert main(argv) == status
    except SystemExit as exited:
        assert exited.code == status
    captured = capsys.readouterr()
    return captured.out if status == 0 else captured.err


# quantities


@pytest.mark.parametrize(
    ("text", "amount"),
    [("4Gi", 4 * 2**30), ("500m", 0.5), ("1.5", 1.5), ("2k", 2000.0), ("16e9", 16e9), ("3M", 3e6), ("1Ki", 1024.0)],
)
def test_quantities_take_the_kubernetes_suffixes(text: str, amount: float) -> None:
    assert parse_quantity("memory", text) == amount


@pytest.mark.parametrize("text", ["4Gx", "-1", "lots", "", "inf", "nan", "1e999", "4 Gi Gi"])
def test_a_bad_quantity_is_refused_naming_the_field_the_value_and_the_rule(text: str) -> None:
    with pytest.raises(RejectedError) as refused:
        parse_quantity("resource memory", text)
    assert str(refused.value).startswith(f"resource memory {text!r}: must be a number >= 0")
    assert "Gi" in str(refused.value)


def test_amounts_show_human_friendly_memory_in_binary_units() -> None:
    assert format_amount("memory", 4 * 2**30) == "4Gi"
    assert format_amount("memory", 1.5 * 2**30) == "1.5Gi"
    assert format_amount("CPU", 0.5) == "500m"
    assert format_amount("CPU", 4) == "4"
    assert format_amount("CPU", 1796) == "1796"  # cores read as cores, not 1.796k
    assert format_amount("CPU", 2.5e7) == "25M"
    assert format_amount("memory", 2**32 + 7) == "4Gi"  # never 4.29497e+09
    assert format_amount("memory", 3.43597e10) == "32Gi"
    assert format_amount("memory", 1000) == "1000"
    assert format_quantity(0) == "0"
    assert format_quantity(1.25) == "1.25"
    assert format_quantity(1e30) == "1000000000000E"


def test_resource_flags_take_quantities_and_kubectl_lowercase_names() -> None:
    assert types.resources("cpu=500m,memory=4Gi,gpu=1") == {"CPU": 0.5, "memory": 4 * 2**30, "GPU": 1.0}
    assert types.amount("1500m") == 1.5
    with pytest.raises(argparse.ArgumentTypeError, match=r"resource memory '4Gx': must be a number >= 0"):
        types.resources("CPU=1,memory=4Gx")
    assert types.format_resources({"memory": 2**31, "CPU": 0.5}) == "CPU=500m,memory=2Gi"


def test_a_bad_quantity_on_the_command_line_is_a_usage_error_naming_flag_and_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = out_of(["submit", "a1", "--cpu", "2x"], capsys, status=2)
    assert "argument --cpu: amount '2x': must be a number >= 0" in err


# label and taint edits


def test_label_edits_set_and_remove_single_keys() -> None:
    edit = label_edit(["tier=web", "team-", "zone=z1,rack=r2"])
    assert edit == LabelEdit({"tier": "web", "zone": "z1", "rack": "r2"}, ["team"])


@pytest.mark.parametrize(
    ("words", "complaint"),
    [
        (["corral.io/zone=z1"], "reserved for system labels"),
        (["tier=a", "tier=b"], "label 'tier' given twice"),
        (["bad key-"], "name 'bad key'"),
        (["tier=a", "tier-"], "both set and removed"),
    ],
)
def test_bad_label_edits_are_usage_errors(words: list[str], complaint: str) -> None:
    with pytest.raises(UsageError, match=complaint):
        label_edit(words)


def test_taint_edits_add_remove_by_key_and_by_key_and_effect() -> None:
    edit = taint_edit(["gpu=true:NoSchedule", "spot:NoExecute-", "maint-"])
    assert edit.add == [Taint("gpu", "true", "NoSchedule")]
    assert (edit.remove_keys, edit.remove_effects) == (["maint"], [("spot", "NoExecute")])
    current = [Taint("spot", "yes", "NoExecute"), Taint("spot", "yes", "NoSchedule"), Taint("maint")]
    assert removals(current, edit, "n1") == (["maint"], {"spot": ["NoExecute"]})  # one command: spot:NoSchedule stays


def test_removing_a_taint_the_node_lacks_is_not_found_naming_it() -> None:
    with pytest.raises(NotFoundError, match="taint gpu:NoExecute not found on node n1"):
        removals([Taint("gpu", "true", "NoSchedule")], taint_edit(["gpu:NoExecute-"]), "n1")
    with pytest.raises(NotFoundError, match="taint 'maint' not found on node n1"):
        removals([], taint_edit(["maint-"]), "n1")
    with pytest.raises(UsageError, match="effect 'Never' must be one of"):
        taint_edit(["gpu:Never-"])


def test_cordon_and_drain_taint_keys_are_valid_prefixed_label_keys() -> None:
    validate_label_key("corral.io/unschedulable", allow_system=True)
    validate_label_key("corral.io/drain", allow_system=True)


# selectors


def test_a_selector_splits_on_commas_outside_parentheses_and_reads_kubectl_not_equal() -> None:
    assert types.selector_list("zone=z1,tier=in(a,b),gpu!=true,ssd=exists()") == [
        ("zone", "z1"),
        ("tier", "in(a,b)"),
        ("gpu", "!true"),
        ("ssd", "exists()"),
    ]
    with pytest.raises(argparse.ArgumentTypeError, match="empty entry"):
        types.selector_list("zone=z1,,tier=a")
    with pytest.raises(argparse.ArgumentTypeError, match="unclosed 'in\\('"):
        types.selector_list("zone=in(z1")


# tables


NOW = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)


def node(node_id: str, taints: list[Taint] | None = None, **labels: str) -> NodeInfo:
    return NodeInfo(
        node_id,
        "",
        {"CPU": 4.0, "memory": 8 * 2**30},
        {"CPU": 2.5, "memory": 6 * 2**30},
        labels,
        taints or [],
        actors=1,
    )


SNAPSHOT = Snapshot(
    nodes=[node("n1", tier="web"), node("n2", [Taint("corral.io/unschedulable")], tier="ml")],
    actors=[ActorInfo("a1", "default", {"team": "x"}, "placed", "n1"), ActorInfo("a2", "default", {}, "pending")],
    placement_groups={"pg1": ["n1", "n2"]},
    pending=[
        Pending("a2", "0/2 nodes are available: 2 node(s) Insufficient GPU.", {"Insufficient GPU": 2}, {}),
        Pending("pg2", "waits", {"Insufficient CPU": 1, "had untolerated taint": 1}, {}, kind="placement_group"),
    ],
)


def test_the_node_table_shows_status_usage_in_quantities_and_age() -> None:
    table = table_of("nodes", SNAPSHOT, wide=False, times={"n1": NOW - timedelta(minutes=5)}, now=NOW)
    assert table.headers == ["NAME", "STATUS", "ZONE", "CPU", "MEMORY", "ACTORS", "AGE"]
    assert table.rows[0] == ["n1", "Ready", "-", "1.5/4", "2Gi/8Gi", "1", "5m0s"]
    assert table.rows[1][1] == "Ready,SchedulingDisabled"
    assert table.rows[1][-1] == "<unknown>"
    wide = table_of("nodes", SNAPSHOT, wide=True, times={}, now=NOW)
    assert wide.headers[-4:] == ["ADDRESS", "RESOURCES", "LABELS", "TAINTS"]
    assert wide.rows[1][-1] == "corral.io/unschedulable:NoSchedule"


def test_every_kind_has_a_table_with_name_first() -> None:
    for kind, names in [("actors", ["a1", "a2"]), ("pgs", ["pg1", "pg2"]), ("pending", ["a2", "pg2"])]:
        table = table_of(kind, SNAPSHOT, wide=True, times={}, now=NOW)
        assert [row[0] for row in table.rows] == names
        assert len(table.items) == len(table.rows)
    assert table_of("pending", SNAPSHOT, wide=False, times={}, now=NOW).rows[1] == [
        "pg2",
        "pg",
        "Insufficient CPU",
        "<unknown>",
    ]


def test_totals_sum_resources_per_kind_and_count_pending_by_first_reason() -> None:
    assert totals(SNAPSHOT) == [
        "Resources (used/total): CPU 3/8, memory 4Gi/16Gi",
        "Pending: 2 (1 Insufficient GPU; 1 Insufficient CPU)",
    ]
    assert first_reason(Pending("x", "m", {}, {}, group_reason="the group waits")) == "the group waits"


def test_a_selector_keeps_matching_nodes_and_actors_and_their_pending_work() -> None:
    picked = select(SNAPSHOT, LabelSelector.parse({"tier": "ml"}), "nodes")
    assert [n.node_id for n in picked.nodes] == ["n2"]
    assert picked.pending == SNAPSHOT.pending  # the pending count under a node list is the cluster's
    team = select(SNAPSHOT, LabelSelector.parse({"team": "x"}), "actors")
    assert ([a.actor_id for a in team.actors], team.pending) == (["a1"], [])


def test_node_status_reads_cordon_and_drain_taints() -> None:
    assert node_status(node("n", [Taint("corral.io/drain", "", "NoExecute")])) == "Ready,SchedulingDisabled,Draining"


def test_age_reads_like_kubectl() -> None:
    assert [age(NOW - timedelta(seconds=s), NOW) for s in (5, 192, 900, 7500, 90000)] == [
        "5s",
        "3m12s",
        "15m",
        "2h5m",
        "1d1h",
    ]
    assert age(None, NOW) == "<unknown>"


# help, version, completion


def test_version_and_dash_dash_version_print_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert out_of(["version"], capsys) == f"corral {version('corral')}\n"
    assert out_of(["--version"], capsys) == f"corral {version('corral')}\n"


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_prints_a_script_naming_the_commands(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    script = out_of(["completion", shell], capsys)
    assert ("compdef" in script) if shell == "zsh" else ("complete " in script)
    for command in ("get", "describe", "cordon", "drain", "completion"):
        assert command in script


@pytest.mark.parametrize(
    "argv",
    [
        ["get"],
        ["describe"],
        ["create"],
        ["delete"],
        ["label"],
        ["taint"],
        ["cordon"],
        ["uncordon"],
        ["drain"],
        ["completion"],
        ["version"],
    ],
    ids=" ".join,
)
def test_the_new_commands_have_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert out_of([*argv, "--help"], capsys).startswith(f"usage: corral {argv[0]}")


def test_get_help_names_output_formats_selector_vc_and_watch(capsys: pytest.CaptureFixture[str]) -> None:
    text = out_of(["get", "--help"], capsys)
    for flag in ("-o FORMAT, --output FORMAT", "-l SELECTOR, --selector SELECTOR", "--vc ID", "-w, --watch"):
        assert flag in text
    assert "table, wide, json, yaml" in text


def test_retired_spellings_are_hidden_from_help(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, retired in [
        (["label"], "--node-id"),
        (["taint"], "--append"),
        (["status"], "--json"),
        (["node", "list"], "--json"),
        (["vc", "list"], "--json"),
    ]:
        assert retired not in out_of([*argv, "--help"], capsys)


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["get", "pods"], "'pods': not a kind"),
        (["get", "nodes", "-o", "xml"], "invalid choice: 'xml'"),
        (["get", "pgs", "-l", "a=b"], "placement groups and virtual clusters carry no labels"),
        (["get", "nodes", "-l", "a=b", "-l", "a=c"], "key 'a' given twice"),
        (["describe", "pod", "x"], "'pod': not a kind"),
        (["label", "n1", "a=b"], "expected `corral label node ID ...`"),
        (["label", "node", "n1"], "give at least one KEY=VALUE or KEY- edit"),
        (["taint", "node", "n1", "gpu=true:Never"], "effect 'Never' must be one of"),
        (["create", "pg", "pg1"], "at least one --bundle"),
        (["create", "pg", "-f", "-", "--bundle", "CPU=1"], "drop --bundle"),
        (["delete", "pods", "p1"], "'pods': not a kind to delete"),
        (["delete", "pending", "p1"], "'pending': not a kind to delete"),
        (["delete", "actors"], "give the objects' names or -l SELECTOR"),
        (["delete", "pgs", "-l", "a=b"], "placement groups and virtual clusters carry no labels"),
        (["get", "nodes", "--selecter", "a=b"], "unrecognized arguments: --selecter a=b; did you mean --selector?"),
        (["node", "strat"], "did you mean start?"),
        (["events", "--actor", "a", "--pg", "p"], "--actor and --pg: give one of them"),
        (["completion", "fish"], "invalid choice: 'fish'"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_bad_kubectl_style_command_lines_exit_2_and_say_why(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = out_of(argv, capsys, status=2)
    assert f"usage: corral {argv[0]}" in err
    assert complaint in err


def test_a_mistyped_command_suggests_the_closest_and_words_after_a_flag_still_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = out_of(["gett", "nodes"], capsys, status=2)
    assert err.startswith("usage: corral [-h]") and err.rstrip().endswith("did you mean get?")
    assert "did you mean --overwrite?" in out_of(["label", "node", "n1", "--overwirte", "a=b"], capsys, status=2)
    assert "did you mean" not in out_of(["get", "nodes", "--zzz"], capsys, status=2)
