"""Node labels: Kubernetes syntax, the reserved prefix, `--labels` / `--labels-file` parsing and default labels."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from schemas import ScheduleRequest
from services.core import Cluster, LabelError, parse_labels, parse_labels_document, validate_labels
from services.core.errors import shown
from services.core.labels import merge_labels
from tests.core.builders import make_actor

PREFIX_253 = ("a" * 49 + ".") * 5 + "abc"  # a lowercase DNS subdomain of exactly 253 characters
PREFIX_254 = ("a" * 49 + ".") * 5 + "abcd"

# keys


@pytest.mark.parametrize(
    "key",
    [
        "app",
        "a",
        "A1",
        "a_b.c-d",
        "x" * 63,
        "example.com/app",
        "sub.example.com/App_1",
        f"{PREFIX_253}/k",
        "my-team/tier",
    ],
    ids=[
        "a plain lowercase name is a valid key",
        "a one-character name is a valid key",
        "a name may use uppercase letters and digits",
        "a name may have dashes, underscores and dots inside",
        "a name of exactly 63 characters is a valid key",
        "a DNS prefix and a name form a valid key",
        "a multi-level DNS prefix is allowed before a mixed-case name",
        "a DNS prefix of exactly 253 characters is allowed",
        "a dashed single-level prefix is allowed",
    ],
)
def test_a_well_formed_key_is_accepted(key: str) -> None:
    assert validate_labels({key: "v"}) == {key: "v"}


@pytest.mark.parametrize(
    ("key", "rule"),
    [
        ("", "non-empty"),
        ("x" * 64, "63 characters"),
        ("-app", "alphanumeric at both ends"),
        ("app-", "alphanumeric at both ends"),
        ("_app", "alphanumeric at both ends"),
        ("app.", "alphanumeric at both ends"),
        ("my app", "alphanumeric at both ends"),
        ("a$b", "alphanumeric at both ends"),
        ("Example.com/app", "lowercase DNS subdomain"),
        ("exa_mple.com/app", "lowercase DNS subdomain"),
        ("-example.com/app", "lowercase DNS subdomain"),
        (f"{PREFIX_254}/k", "253 characters"),
        ("/app", "lowercase DNS subdomain"),
        ("example.com/", "alphanumeric at both ends"),
        ("a/b/c", "lowercase DNS subdomain"),
        pytest.param("app\n", "alphanumeric at both ends"),
        pytest.param("example.com\n/app", "lowercase DNS subdomain"),
    ],
    ids=[
        "an empty key is rejected",
        "a name of 64 characters is rejected",
        "a name starting with a dash is rejected",
        "a name ending with a dash is rejected",
        "a name starting with an underscore is rejected",
        "a name ending with a dot is rejected",
        "a name with a blank is rejected",
        "a name with a dollar sign is rejected",
        "an uppercase prefix is rejected",
        "a prefix with an underscore is rejected",
        "a prefix starting with a dash is rejected",
        "a prefix of 254 characters is rejected",
        "an empty prefix before the slash is rejected",
        "an empty name after the slash is rejected",
        "a key with two slashes is rejected",
        "a name ending in a newline is rejected",
        "a prefix ending in a newline is rejected",
    ],
)
def test_a_malformed_key_is_rejected_naming_the_key_and_the_rule(key: str, rule: str) -> None:
    with pytest.raises(LabelError) as raised:
        validate_labels({key: "v"})
    assert shown(key) in str(raised.value)
    assert rule in str(raised.value)


# values


@pytest.mark.parametrize(
    "value",
    ["", "v", "V1", "a-b_c.d", "x" * 63],
    ids=[
        "an empty value is accepted",
        "a one-character value is accepted",
        "a value may use uppercase letters and digits",
        "a value may have dashes, underscores and dots inside",
        "a value of exactly 63 characters is accepted",
    ],
)
def test_a_well_formed_value_is_accepted(value: str) -> None:
    assert validate_labels({"k": value}) == {"k": value}


@pytest.mark.parametrize(
    "value",
    [
        "x" * 64,
        "-v",
        "v-",
        ".v",
        "a b",
        "a/b",
        "a=b",
        pytest.param("v\n"),
    ],
    ids=[
        "a value of 64 characters is rejected",
        "a value starting with a dash is rejected",
        "a value ending with a dash is rejected",
        "a value starting with a dot is rejected",
        "a value with a blank is rejected",
        "a value with a slash is rejected",
        "a value with an equals sign is rejected",
        "a value ending in a newline is rejected",
    ],
)
def test_a_malformed_value_is_rejected_naming_key_value_and_rule(value: str) -> None:
    with pytest.raises(LabelError) as raised:
        validate_labels({"tier": value})
    message = str(raised.value)
    assert "'tier'" in message
    assert repr(value) in message
    assert "63 characters" in message


def test_label_error_is_a_value_error() -> None:
    assert issubclass(LabelError, ValueError)


@pytest.mark.parametrize(
    ("labels", "key", "value", "rule"),
    [
        ({"tier": "-bad"}, "tier", "-bad", "alphanumeric at both ends"),
        pytest.param(
            {"Bad Key": "value-42"},
            "Bad Key",
            "value-42",
            "alphanumeric at both ends",
        ),
        pytest.param(
            {"corral.io/zone": "value-42"},
            "corral.io/zone",
            "value-42",
            "reserved",
        ),
    ],
    ids=[
        "a bad value's error names the key, the value and the rule",
        "a bad key's error names the key, the value and the rule",
        "a reserved key's error names the key, the value and the rule",
    ],
)
def test_label_error_names_key_value_and_rule(labels: dict[str, str], key: str, value: str, rule: str) -> None:
    with pytest.raises(LabelError) as raised:
        validate_labels(labels)
    message = str(raised.value)
    assert repr(key) in message
    assert repr(value) in message
    assert rule in message


# the reserved prefix


def test_validate_labels_rejects_the_reserved_prefix() -> None:
    with pytest.raises(LabelError, match=r"'corral\.io/zone'.*reserved"):
        validate_labels({"corral.io/zone": "z1"})


def test_a_key_merely_containing_corral_is_not_reserved() -> None:
    assert validate_labels({"corral.example.com/team": "ml"}) == {"corral.example.com/team": "ml"}


def _register_node_with_reserved_label(cluster: Cluster) -> None:
    cluster.add_node("n1", {"CPU": 4}, labels={"corral.io/hostname": "fake"})


def _relabel_node_with_reserved_label(cluster: Cluster) -> None:
    cluster.set_labels("n0", {"corral.io/hostname": "fake"})


def _submit_actor_with_reserved_label(cluster: Cluster) -> None:
    cluster.submit(make_actor("a1", labels={"corral.io/hostname": "fake"}))


RESERVED_CALLS: list[Callable[[Cluster], None]] = [
    _register_node_with_reserved_label,
    _relabel_node_with_reserved_label,
    _submit_actor_with_reserved_label,
]
RESERVED_IDS = [
    "add_node refuses a user label under corral.io/",
    "set_labels refuses a user label under corral.io/",
    "an actor's own labels may not use corral.io/",
]


def _one_node_cluster() -> Cluster:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4}, labels={"team": "ml"}, hostname="h0")
    return cluster


@pytest.mark.parametrize("call", RESERVED_CALLS, ids=RESERVED_IDS)
def test_users_cannot_set_reserved_labels_through_the_cluster(call: Callable[[Cluster], None]) -> None:
    cluster = _one_node_cluster()
    before = cluster.events()
    labels_before = dict(cluster.view.nodes["n0"].labels)
    with pytest.raises(ValueError, match=r"'corral\.io/hostname'.*reserved"):
        call(cluster)
    assert cluster.events() == before
    assert cluster.view.nodes["n0"].labels == labels_before
    assert cluster.placements() == {}


@pytest.mark.parametrize(
    "call",
    RESERVED_CALLS,
    ids=[
        "add_node raises LabelError for a reserved label",
        "set_labels raises LabelError for a reserved label",
        "submit raises LabelError for a reserved actor label",
    ],
)
def test_bad_labels_given_to_the_cluster_raise_label_error(call: Callable[[Cluster], None]) -> None:
    cluster = _one_node_cluster()
    with pytest.raises(LabelError):
        call(cluster)


# --labels


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("k=v", {"k": "v"}),
        ("k=", {"k": ""}),
        ("k=v,k2=v2", {"k": "v", "k2": "v2"}),
        ("k=v, k2=v2", {"k": "v", "k2": "v2"}),
        ("k=v,    k2=v2", {"k": "v", "k2": "v2"}),
        ("example.com/team=ml", {"example.com/team": "ml"}),
    ],
    ids=[
        "an empty string gives no labels",
        "one pair gives one label",
        "a key with nothing after '=' gets the empty value",
        "pairs are separated by commas",
        "a space after a comma is ignored",
        "several spaces after a comma are ignored",
        "a prefixed key parses",
    ],
)
def test_parse_labels_reads_comma_separated_pairs(text: str, expected: dict[str, str]) -> None:
    assert parse_labels(text) == expected


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("a=b=c", "a=b=c"),
        ("k=v, k=w", "'k'"),
        ("k", "'k'"),
        ("k=v, corral.io/zone=z1", "'corral.io/zone'"),
        ("Bad Key=v", "'Bad Key'"),
        ("k=bad value", "'bad value'"),
    ],
    ids=[
        "two '=' in one pair is an error",
        "the same key twice is an error",
        "a pair without '=' is an error",
        "a reserved key is an error",
        "a malformed key is an error",
        "a malformed value is an error",
    ],
)
def test_parse_labels_rejects_bad_text_naming_the_culprit(text: str, named: str) -> None:
    with pytest.raises(LabelError) as raised:
        parse_labels(text)
    assert named in str(raised.value)


# --labels-file


def test_parse_labels_document_reads_a_yaml_map_of_strings() -> None:
    text = "zone: z1\ndisk: ssd\ntier: '1'\nexample.com/team: ml\n"
    assert parse_labels_document(text, "labels.yaml") == {
        "zone": "z1",
        "disk": "ssd",
        "tier": "1",
        "example.com/team": "ml",
    }


@pytest.mark.parametrize(
    "content",
    [
        "- zone\n- disk\n",
        "tier: 1\n",
        "gpu: true\n",
        "zone:\n",
        "",
        "# only a comment\n",
        "just some text\n",
        "zone: [z1, z2]\n",
        "Bad Key: v\n",
        "corral.io/zone: z1\n",
        "zone: z1: z2\n",
    ],
    ids=[
        "a YAML list is refused",
        "a number value is refused",
        "a boolean value is refused",
        "a missing value is refused",
        "an empty file is refused",
        "a file with only a comment is refused",
        "a bare string is refused",
        "a list value is refused",
        "a malformed key is refused",
        "a reserved key is refused",
        "invalid YAML is refused",
    ],
)
def test_parse_labels_document_refuses_anything_but_a_map_of_strings(content: str) -> None:
    with pytest.raises(LabelError):
        parse_labels_document(content, "labels.yaml")


def test_parse_labels_document_names_the_entry_with_a_non_string_value() -> None:
    text = "tier: 1\n"
    with pytest.raises(LabelError, match="'tier'"):
        parse_labels_document(text, "labels.yaml")


@pytest.mark.parametrize(
    ("from_file", "from_flag", "expected"),
    [
        ({"zone": "z1"}, {"disk": "ssd"}, {"zone": "z1", "disk": "ssd"}),
        ({"zone": "z1", "disk": "hdd"}, {"zone": "z2"}, {"zone": "z2", "disk": "hdd"}),
        ({}, {"zone": "z2"}, {"zone": "z2"}),
        ({"zone": "z1"}, {}, {"zone": "z1"}),
        ({"zone": "z1"}, {"zone": ""}, {"zone": ""}),
    ],
    ids=[
        "labels from the file and the flag combine",
        "--labels wins over the file on a shared key",
        "only --labels given",
        "only the file given",
        "an empty --labels value still wins over the file",
    ],
)
def test_merge_labels_lets_the_flag_win(
    from_file: dict[str, str], from_flag: dict[str, str], expected: dict[str, str]
) -> None:
    assert merge_labels(from_file, from_flag) == expected


def test_merging_a_parsed_file_with_parsed_flags() -> None:
    text = "zone: z1\ndisk: hdd\n"
    merged = merge_labels(parse_labels_document(text, "labels.yaml"), parse_labels("zone=z2, rack=r7"))
    assert merged == {"zone": "z2", "disk": "hdd", "rack": "r7"}


# default labels


@pytest.mark.parametrize(
    ("argument", "value", "label"),
    [
        ("hostname", "host-1", "corral.io/hostname"),
        ("zone", "us-east-1a", "corral.io/availability-zone"),
        ("region", "us-east-1", "corral.io/availability-region"),
        ("accelerator_type", "A100", "corral.io/accelerator-type"),
        ("market_type", "spot", "corral.io/market-type"),
        ("node_group", "workers", "corral.io/node-group"),
    ],
    ids=[
        "hostname fills corral.io/hostname",
        "zone fills corral.io/availability-zone",
        "region fills corral.io/availability-region",
        "accelerator_type fills corral.io/accelerator-type",
        "market_type fills corral.io/market-type",
        "node_group fills corral.io/node-group",
    ],
)
def test_add_node_fills_default_labels(argument: str, value: str, label: str) -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4}, {"team": "ml"}, **{argument: value})  # type: ignore[arg-type]
    assert cluster.view.nodes["n0"].labels == {"team": "ml", "corral.io/node-id": "n0", label: value}


def test_every_node_carries_its_node_id_label_and_nothing_else_unasked() -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4})
    assert cluster.view.nodes["n0"].labels == {"corral.io/node-id": "n0"}


def test_add_node_with_every_keyword_fills_every_default_label() -> None:
    cluster = Cluster()
    cluster.add_node(
        "n0",
        {"CPU": 4},
        hostname="h0",
        zone="z0",
        region="r0",
        accelerator_type="A100",
        market_type="on-demand",
        node_group="head",
    )
    assert cluster.view.nodes["n0"].labels == {
        "corral.io/node-id": "n0",
        "corral.io/hostname": "h0",
        "corral.io/availability-zone": "z0",
        "corral.io/availability-region": "r0",
        "corral.io/accelerator-type": "A100",
        "corral.io/market-type": "on-demand",
        "corral.io/node-group": "head",
    }


def test_a_default_label_with_a_malformed_value_is_refused_and_nothing_is_registered() -> None:
    cluster = Cluster()
    with pytest.raises(ValueError, match="'bad zone'"):
        cluster.add_node("n0", {"CPU": 4}, zone="bad zone")
    assert cluster.events() == []
    assert cluster.view.nodes == {}


def test_requests_can_select_on_default_labels() -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4}, zone="z0", accelerator_type="T4")
    cluster.add_node("n1", {"CPU": 4}, zone="z1", accelerator_type="A100")
    request = ScheduleRequest("a", {"CPU": 1}, label_selector={"corral.io/accelerator-type": "A100"})
    cluster.submit(request)
    assert cluster.placements() == {"a": "n1"}


# set_labels


def test_set_labels_replaces_user_labels_and_keeps_system_labels() -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4}, {"a": "1", "b": "2"}, hostname="h0", zone="z0")
    cluster.set_labels("n0", {"c": "3"})
    assert cluster.view.nodes["n0"].labels == {
        "c": "3",
        "corral.io/node-id": "n0",
        "corral.io/hostname": "h0",
        "corral.io/availability-zone": "z0",
    }


def test_set_labels_with_nothing_clears_user_labels_only() -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4}, {"a": "1"}, hostname="h0")
    cluster.set_labels("n0", {})
    assert cluster.view.nodes["n0"].labels == {"corral.io/node-id": "n0", "corral.io/hostname": "h0"}


def test_a_removed_user_label_no_longer_attracts_requests() -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4}, {"disk": "ssd"})
    cluster.set_labels("n0", {"disk": "hdd"})
    decision = cluster.submit(make_actor("a", label_selector={"disk": "ssd"}))
    assert decision.id == "a"
    assert cluster.placements() == {}
    assert [p.reasons for p in cluster.pending()] == [{"didn't match the label selector": 1}]


def test_relabelling_a_node_places_an_actor_waiting_for_that_label() -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4})
    cluster.submit(make_actor("a", label_selector={"disk": "ssd"}))
    assert cluster.placements() == {}
    cluster.set_labels("n0", {"disk": "ssd"})
    assert cluster.placements() == {"a": "n0"}
    assert cluster.pending() == []
