"""Label selectors: the string grammar, its structured twins, its errors, and how they filter nodes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from schemas import DoesNotExist, Exists, In, LabelMatch, NotIn, SelectorValue
from services.core import Cluster, LabelError, LabelSelector, Pending, Placed
from tests.core.builders import WRONG_TYPES_IN_PYTHON_ONLY, make_actor, make_cluster

LABEL_SETS: list[dict[str, str]] = [{"k": "a"}, {"k": "b"}, {"k": "c"}, {"k": ""}, {}, {"other": "a"}]


@pytest.mark.parametrize(
    ("condition", "labels", "matches"),
    [
        ("a", {"k": "a"}, True),
        ("a", {"k": "b"}, False),
        ("a", {}, False),
        ("a", {"other": "a"}, False),
        ("!a", {"k": "a"}, False),
        ("!a", {"k": "b"}, True),
        ("!a", {}, True),
        ("in(a,b)", {"k": "a"}, True),
        ("in(a,b)", {"k": "b"}, True),
        ("in(a,b)", {"k": "c"}, False),
        ("in(a,b)", {}, False),
        ("!in(a,b)", {"k": "a"}, False),
        ("!in(a,b)", {"k": "b"}, False),
        ("!in(a,b)", {"k": "c"}, True),
        ("!in(a,b)", {}, True),
        ("exists()", {"k": "a"}, True),
        ("exists()", {"k": ""}, True),
        ("exists()", {}, False),
        ("!exists()", {"k": "a"}, False),
        ("!exists()", {"k": ""}, False),
        ("!exists()", {}, True),
        ("IN(a)", {"k": "a"}, True),
        ("In(a, b)", {"k": "b"}, True),
        ("!IN(a)", {"k": "a"}, False),
        ("!In(a)", {"k": "c"}, True),
        ("Exists()", {"k": "a"}, True),
        ("EXISTS()", {}, False),
        ("!Exists()", {}, True),
        ("!EXISTS()", {"k": "a"}, False),
        ("in( a , b )", {"k": "b"}, True),
        ("in(  a  )", {"k": "a"}, True),
        ("!in( a, b )", {"k": "a"}, False),
        ("exists( )", {"k": "a"}, True),
        ("!exists(  )", {}, True),
    ],
    ids=[
        "v matches a node whose value is v",
        "v does not match another value",
        "a node lacking the key fails v",
        "v looks only at its own key",
        "!v fails a node whose value is v",
        "!v matches another value",
        "a node lacking the key passes !v",
        "in(a,b) matches the first listed value",
        "in(a,b) matches the second listed value",
        "in(a,b) does not match an unlisted value",
        "a node lacking the key fails in(a,b)",
        "!in(a,b) fails the first listed value",
        "!in(a,b) fails the second listed value",
        "!in(a,b) matches an unlisted value",
        "a node lacking the key passes !in(a,b)",
        "exists() matches any value",
        "exists() matches an empty value",
        "a node lacking the key fails exists()",
        "!exists() fails any value",
        "!exists() fails an empty value",
        "a node lacking the key passes !exists()",
        "IN in capitals works like in",
        "In in mixed case works like in",
        "!IN in capitals works like !in",
        "!In in mixed case works like !in",
        "Exists() in mixed case works like exists()",
        "EXISTS() in capitals works like exists()",
        "!Exists() in mixed case works like !exists()",
        "!EXISTS() in capitals works like !exists()",
        "blanks around values inside in() are ignored",
        "several blanks around a single value are ignored",
        "blanks inside !in() are ignored",
        "a blank inside exists() is ignored",
        "blanks inside !exists() are ignored",
    ],
)
def test_each_grammar_form_matches_as_described(condition: str, labels: dict[str, str], matches: bool) -> None:
    assert LabelSelector.parse({"k": condition}).matches(labels) is matches


@pytest.mark.parametrize(
    ("structured", "labels", "matches"),
    [
        (In("a", "b"), {"k": "b"}, True),
        (In("a", "b"), {"k": "c"}, False),
        (In("a"), {}, False),
        (NotIn("a", "b"), {"k": "a"}, False),
        (NotIn("a", "b"), {"k": "c"}, True),
        (NotIn("a"), {}, True),
        (Exists(), {"k": "a"}, True),
        (Exists(), {}, False),
        (DoesNotExist(), {"k": "a"}, False),
        (DoesNotExist(), {}, True),
    ],
    ids=[
        "In matches a listed value",
        "In does not match an unlisted value",
        "a node lacking the key fails In",
        "NotIn fails a listed value",
        "NotIn matches an unlisted value",
        "a node lacking the key passes NotIn",
        "Exists matches any value",
        "a node lacking the key fails Exists",
        "DoesNotExist fails a present key",
        "a node lacking the key passes DoesNotExist",
    ],
)
def test_structured_operators_match_as_described(structured: LabelMatch, labels: dict[str, str], matches: bool) -> None:
    assert LabelSelector.parse({"k": structured}).matches(labels) is matches


@pytest.mark.parametrize(
    ("text", "structured"),
    [
        ("a", In("a")),
        ("!a", NotIn("a")),
        ("in(a,b)", In("a", "b")),
        ("!in(a,b)", NotIn("a", "b")),
        ("exists()", Exists()),
        ("!exists()", DoesNotExist()),
    ],
    ids=[
        "v is the same as In(v)",
        "!v is the same as NotIn(v)",
        "in(a,b) is the same as In(a, b)",
        "!in(a,b) is the same as NotIn(a, b)",
        "exists() is the same as Exists()",
        "!exists() is the same as DoesNotExist()",
    ],
)
def test_the_string_grammar_and_the_structured_form_agree(text: str, structured: LabelMatch) -> None:
    by_text = LabelSelector.parse({"k": text})
    by_struct = LabelSelector.parse({"k": structured})
    assert [by_text.matches(labels) for labels in LABEL_SETS] == [by_struct.matches(labels) for labels in LABEL_SETS]


@pytest.mark.parametrize(
    "labels",
    LABEL_SETS,
    ids=[
        "the empty selector matches a node with k=a",
        "the empty selector matches a node with k=b",
        "the empty selector matches a node with k=c",
        "the empty selector matches a node with an empty value",
        "the empty selector matches a node with no labels",
        "the empty selector matches a node with another key",
    ],
)
def test_the_empty_selector_matches_every_node(labels: dict[str, str]) -> None:
    assert LabelSelector.parse({}).matches(labels)


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ({"zone": "in(z1,z2)", "disk": "ssd"}, {"zone": "z1", "disk": "ssd"}, True),
        ({"zone": "in(z1,z2)", "disk": "ssd"}, {"zone": "z1", "disk": "hdd"}, False),
        ({"zone": "in(z1,z2)", "disk": "ssd"}, {"zone": "z3", "disk": "ssd"}, False),
        ({"zone": "!z1", "gpu": "!exists()"}, {"zone": "z2"}, True),
        ({"zone": "!z1", "gpu": "!exists()"}, {"zone": "z2", "gpu": "t4"}, False),
    ],
    ids=[
        "a node passing every entry matches",
        "a node failing the second entry does not match",
        "a node failing the first entry does not match",
        "a node outside z1 without a gpu label passes both negative entries",
        "one failing negative entry is enough to refuse the node",
    ],
)
def test_every_entry_of_a_selector_must_hold(
    selector: dict[str, SelectorValue], labels: dict[str, str], matches: bool
) -> None:
    assert LabelSelector.parse(selector).matches(labels) is matches


def test_a_selector_may_name_system_labels() -> None:
    selector = LabelSelector.parse({"corral.io/availability-zone": "z1"})
    assert selector.matches({"corral.io/availability-zone": "z1"})


# errors


@pytest.mark.parametrize(
    ("condition", "named"),
    [
        ("in()", "in()"),
        ("!in()", "!in()"),
        ("in( )", "in( )"),
        ("in(a,", "in(a,"),
        ("!in(a, b", "!in(a, b"),
        ("!!v", "!!v"),
        ("!!in(a)", "!!in(a)"),
        ("x" * 64, "x" * 64),
        ("!" + "x" * 64, "x" * 64),
        ("in(a," + "y" * 64 + ")", "y" * 64),
        ("in(a,,b)", "in(a,,b)"),
        ("exists(a)", "exists(a)"),
        ("bad value", "bad value"),
    ],
    ids=[
        "in() with no values is an error",
        "!in() with no values is an error",
        "in() with only a blank is an error",
        "an unclosed in(a, is an error",
        "an unclosed !in(a, b is an error",
        "!!v is an error",
        "!!in(a) is an error",
        "a value over 63 characters is an error",
        "a negated value over 63 characters is an error",
        "a listed value over 63 characters is an error",
        "an empty value between commas is an error",
        "exists() with a value is an error",
        "a value with a blank is an error",
    ],
)
def test_a_malformed_condition_is_rejected_naming_key_and_condition(condition: str, named: str) -> None:
    with pytest.raises(LabelError) as raised:
        LabelSelector.parse({"tier": condition})
    assert "'tier'" in str(raised.value)
    assert named in str(raised.value)


@pytest.mark.parametrize(
    "build",
    [In, NotIn],
    ids=["In() with no values is an error", "NotIn() with no values is an error"],
)
def test_a_structured_list_operator_needs_values(build: Callable[..., LabelMatch]) -> None:
    with pytest.raises(ValueError, match="at least one value"):
        build()


def test_a_structured_value_over_63_characters_is_an_error() -> None:
    with pytest.raises(LabelError, match="'tier'"):
        LabelSelector.parse({"tier": In("a", "x" * 64)})


@pytest.mark.parametrize(
    "key",
    ["Bad Key", "-k", "Example.com/k", ""],
    ids=[
        "a selector key with a blank is an error",
        "a selector key starting with a dash is an error",
        "a selector key with an uppercase prefix is an error",
        "an empty selector key is an error",
    ],
)
def test_a_malformed_selector_key_is_an_error(key: str) -> None:
    with pytest.raises(LabelError):
        LabelSelector.parse({key: "v"})


# through the cluster


def _zoned_cluster() -> Cluster:
    """n0, n1, n2 in zones z0, z1, z2; n1 also has disk=ssd."""
    cluster = make_cluster(3)
    cluster.set_labels("n1", {"disk": "ssd"})
    return cluster


@pytest.mark.parametrize(
    ("selector", "allowed"),
    [
        ({"corral.io/availability-zone": "z1"}, {"n1"}),
        ({"corral.io/availability-zone": "in(z0,z2)"}, {"n0", "n2"}),
        ({"corral.io/availability-zone": "!z1"}, {"n0", "n2"}),
        ({"corral.io/availability-zone": "!in(z0,z1)"}, {"n2"}),
        ({"disk": "ssd"}, {"n1"}),
        ({"disk": "exists()"}, {"n1"}),
        ({"disk": "!exists()"}, {"n0", "n2"}),
        ({"disk": "!ssd"}, {"n0", "n2"}),
        ({"disk": In("ssd")}, {"n1"}),
        ({"disk": DoesNotExist()}, {"n0", "n2"}),
        ({}, {"n0", "n1", "n2"}),
    ],
    ids=[
        "v sends every actor to the node with that zone",
        "in(..) keeps actors on the listed zones",
        "!v keeps actors off that zone",
        "!in(..) keeps actors off the listed zones",
        "a user label selects its node",
        "exists() selects the node carrying the key",
        "!exists() selects the nodes lacking the key",
        "!v lets nodes lacking the key in",
        "In(..) selects like the string form",
        "DoesNotExist() selects like !exists()",
        "the empty selector allows every node",
    ],
)
def test_label_selector_keeps_actors_on_matching_nodes(selector: dict[str, SelectorValue], allowed: set[str]) -> None:
    cluster = _zoned_cluster()
    capacity = 4 * len(allowed)
    for index in range(capacity):
        decision = cluster.submit(make_actor(f"a{index}", label_selector=selector))
        assert isinstance(decision, Placed)
        assert decision.node_id in allowed
    assert set(cluster.placements().values()) <= allowed
    assert len(cluster.placements()) == capacity
    overflow = cluster.submit(make_actor("overflow", label_selector=selector))
    assert isinstance(overflow, Pending)
    assert overflow.nodes_by_reason.get("Insufficient CPU") == sorted(allowed)


def test_an_unmatched_selector_explains_itself_in_the_kubernetes_style() -> None:
    cluster = make_cluster(3)
    decision = cluster.submit(make_actor("a", label_selector={"disk": "ssd"}))
    assert isinstance(decision, Pending)
    assert decision.message == (
        "0/3 nodes are available: 3 node(s) didn't match the label selector; no node has a label key 'disk'."
    )
    assert decision.reasons == {"didn't match the label selector": 3}
    assert decision.nodes_by_reason == {"didn't match the label selector": ["n0", "n1", "n2"]}


def test_a_selector_on_a_full_node_counts_each_node_once() -> None:
    cluster = make_cluster(3)
    cluster.submit(make_actor("blocker", 4, label_selector={"corral.io/availability-zone": "z0"}))
    decision = cluster.submit(make_actor("a", label_selector={"corral.io/availability-zone": "z0"}))
    assert isinstance(decision, Pending)
    assert decision.reasons == {"didn't match the label selector": 2, "Insufficient CPU": 1}
    assert decision.nodes_by_reason == {"didn't match the label selector": ["n1", "n2"], "Insufficient CPU": ["n0"]}
    assert sum(decision.reasons.values()) == 3
    assert decision.message.startswith("0/3 nodes are available: ")
    assert "2 node(s) didn't match the label selector" in decision.message
    assert "1 node(s) Insufficient CPU" in decision.message


def test_a_node_gaining_the_selected_label_places_the_waiting_actor() -> None:
    cluster = make_cluster(3)
    cluster.submit(make_actor("a", label_selector={"disk": "ssd"}))
    cluster.add_node("n3", {"CPU": 4}, {"disk": "ssd"})
    assert cluster.placements() == {"a": "n3"}
    assert cluster.pending() == []


def test_a_malformed_selector_in_a_request_is_refused_and_records_nothing() -> None:
    cluster = make_cluster(3)
    before = cluster.events()
    with pytest.raises(ValueError, match=r"label_selector.*'tier'.*in\(a,"):
        cluster.submit(make_actor("a", label_selector={"tier": "in(a,"}))
    assert cluster.events() == before


@WRONG_TYPES_IN_PYTHON_ONLY
@pytest.mark.parametrize("empty", [[], "", 0, ()], ids=["a list", "a string", "zero", "a tuple"])
def test_an_empty_selector_that_is_not_a_mapping_is_refused_as_any_other(empty: object) -> None:
    """`{}` selects every node without a parse; an empty value of another type is not `{}`."""
    cluster = make_cluster(3)
    before = cluster.events()
    with pytest.raises(ValueError, match=r"label_selector.*must be a mapping of label keys to conditions"):
        cluster.submit(make_actor("a", label_selector=empty))
    with pytest.raises(ValueError, match=r"tolerations.*must be a mapping of taint keys to conditions"):
        cluster.submit(make_actor("a", tolerations=empty))
    assert cluster.events() == before
