"""The JSON Schema export of the wire contract: checked in, up to date, deterministic, and true to msgspec's JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import msgspec
import pytest

from schemas import (
    ActorPending,
    ActorPlaced,
    AnyEvent,
    Explanation,
    NodeAffinitySchedulingStrategy,
    NodeRegistered,
    ScheduleRequest,
    Taint,
    TaintsChanged,
    VirtualCluster,
    VirtualClusterRequested,
    VirtualNodesReserved,
)
from schemas import subjects as s
from schemas.commands import SubmitActor
from schemas.queries import NodeInfo, NodesReply
from schemas.subjects import subject_of
from services.cli.__main__ import main
from services.cli.commands.schema import DEFAULT_OUT, export, subject_constants

CHECKED_IN = Path(__file__).resolve().parents[2] / "schemas" / "jsonschema"
FILES = ("commands.json", "events.json", "replies.json", "queries.json", "subjects.json")


def load(name: str) -> Any:
    """A checked-in export file, parsed."""
    return json.loads((CHECKED_IN / name).read_text(encoding="utf-8"))


def as_json(value: object) -> Any:
    """A wire value as msgspec puts it on the bus, parsed back into plain JSON values."""
    return json.loads(msgspec.json.encode(value))


def test_the_default_export_folder_is_the_checked_in_one() -> None:
    assert DEFAULT_OUT == CHECKED_IN


def test_the_checked_in_export_equals_a_fresh_export(tmp_path: Path) -> None:
    written = export(tmp_path)
    assert sorted(path.name for path in written) == sorted(FILES)
    assert sorted(path.name for path in CHECKED_IN.glob("*.json")) == sorted(FILES)
    for name in FILES:
        fresh = (tmp_path / name).read_text(encoding="utf-8")
        assert (CHECKED_IN / name).read_text(encoding="utf-8") == fresh, (
            f"schemas/jsonschema/{name} is stale: run `corral schema export`"
        )


def test_the_export_is_deterministic_with_sorted_keys_and_a_trailing_newline(tmp_path: Path) -> None:
    export(tmp_path / "first")
    export(tmp_path / "second")
    for name in FILES:
        text = (tmp_path / "first" / name).read_text(encoding="utf-8")
        assert text == (tmp_path / "second" / name).read_text(encoding="utf-8")
        assert text.endswith("}\n")
        assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_schema_export_check_tells_when_the_files_are_stale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "export", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"wrote {tmp_path / name}" for name in FILES]
    assert main(["schema", "export", "--out", str(tmp_path), "--check"]) == 0
    (tmp_path / "events.json").write_text("{}\n", encoding="utf-8")
    assert main(["schema", "export", "--out", str(tmp_path), "--check"]) == 1
    assert "events.json" in capsys.readouterr().err


def test_schema_export_check_calls_a_file_that_is_not_utf8_or_a_directory_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["schema", "export", "--out", str(tmp_path)]) == 0
    (tmp_path / "events.json").write_bytes(b"\xff")
    (tmp_path / "replies.json").unlink()
    (tmp_path / "replies.json").mkdir()
    assert main(["schema", "export", "--out", str(tmp_path), "--check"]) == 1
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .startswith("corral schema export: error: events.json, replies.json in ")
    )


def test_every_group_names_its_entry_types_in_defs() -> None:
    assert {"RegisterNode", "SetLabels", "RemoveNode", "Heartbeat", "AddTaints", "RemoveTaints"} <= set(
        load("commands.json")["$defs"]
    )
    assert "SchedulerRequest" in load("commands.json")["$defs"]
    assert "AnyEvent" in load("events.json")["$defs"]
    assert {"CommandReply", "RequestReply", "Accepted", "Rejected"} <= set(load("replies.json")["$defs"])
    assert {"NodesQuery", "NodesReply", "StatusQuery", "StatusReply", "DecisionQuery", "Decision"} <= set(
        load("queries.json")["$defs"]
    )


def test_subjects_json_describes_every_constant_of_the_subjects_module() -> None:
    document = load("subjects.json")
    described = {entry["name"] for entry in document["subjects"]} | set(document["constants"])
    assert set(subject_constants()) <= described


def test_every_event_type_travels_on_exactly_one_event_subject_pattern() -> None:
    document = load("subjects.json")
    carried = [item["type"] for entry in document["subjects"] if entry["kind"] == "event" for item in entry["carries"]]
    assert sorted(carried) == sorted(kind.__name__ for kind in get_args(AnyEvent))


def test_every_schema_reference_in_subjects_json_resolves() -> None:
    for entry in load("subjects.json")["subjects"]:
        for item in entry["carries"] + entry.get("replies", []):
            file_name, _, pointer = item["schema"].partition("#/$defs/")
            assert pointer in load(file_name)["$defs"], item


@pytest.mark.parametrize(
    ("event", "key"),
    [
        (NodeRegistered(node_id="n1", resources={"CPU": 1}, labels={}), "node_id"),
        (TaintsChanged(node_id="n1", taints=[]), "node_id"),
        (ActorPlaced(actor_id="a1", node_id="n1"), "actor_id"),
        (VirtualClusterRequested(vc_id="vc1", spec=VirtualCluster()), "vc_id"),
        (VirtualNodesReserved(vc_id="vc1", vnodes=[]), "vc_id"),
    ],
    ids=["NodeRegistered", "TaintsChanged", "ActorPlaced", "VirtualClusterRequested", "VirtualNodesReserved"],
)
def test_the_event_patterns_match_where_the_bus_appends(event: AnyEvent, key: str) -> None:
    patterns = [entry["subject"] for entry in load("subjects.json")["subjects"] if entry["kind"] == "event"]
    identifier = getattr(event, key)
    assert subject_of(event) in [pattern.replace("{" + key + "}", identifier) for pattern in patterns]
    assert subject_of(event).startswith(f"{s.PREFIX}.evt.")


def test_virtual_cluster_intents_and_the_schedulers_facts_travel_on_separate_aggregates() -> None:
    """The vclusters service publishes only `corral.evt.vc.>`, the scheduler only `corral.evt.vnode.>` of these."""
    assert s.subject_of(VirtualClusterRequested(vc_id="vc1", spec=VirtualCluster())) == "corral.evt.vc.vc1"
    assert s.subject_of(VirtualNodesReserved(vc_id="vc1", vnodes=[])) == "corral.evt.vnode.vc1"


# validating msgspec's JSON against the export (needs the jsonschema package, which check-jsonschema brings)


def validator(name: str) -> Any:
    """A Draft 2020-12 validator for one checked-in file (skips the test without the jsonschema package)."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = load(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_an_event_msgspec_encodes_validates_against_events_json() -> None:
    events = validator("events.json")
    explanation = Explanation(2, "0/2 nodes are available: 2 node(s) Insufficient GPU.", {"Insufficient GPU": 2})
    for event in (
        ActorPending(actor_id="a1", explanation=explanation, event_id="e1", correlation_id="c1"),
        NodeRegistered(node_id="n1", resources={"CPU": 8}, labels={"tier": "web"}, taints=[Taint("gpu", "true")]),
    ):
        assert [error.message for error in events.iter_errors(as_json(event))] == [], event


def test_an_event_missing_a_required_field_does_not_validate() -> None:
    events = validator("events.json")
    broken = as_json(ActorPlaced(actor_id="a1", node_id="n1"))
    del broken["node_id"]
    assert not events.is_valid(broken)
    assert not events.is_valid({**as_json(ActorPlaced(actor_id="a1", node_id="n1")), "type": "ActorVanished"})


def test_a_scheduler_request_and_a_query_reply_validate_against_their_groups() -> None:
    request = ScheduleRequest("a1", {"CPU": 1}, scheduling_strategy=NodeAffinitySchedulingStrategy("n1", soft=True))
    node = NodeInfo("n1", "", {"CPU": 8}, {"CPU": 8}, {"corral.io/node-id": "n1"}, [])
    for group, message in (("commands.json", SubmitActor(request=request)), ("queries.json", NodesReply([node]))):
        assert [error.message for error in validator(group).iter_errors(as_json(message))] == [], message


def test_unknown_fields_and_negative_amounts_do_not_validate() -> None:
    commands = validator("commands.json")
    request = as_json(SubmitActor(request=ScheduleRequest("a1", {"CPU": 1})))
    commands.validate(request)
    assert not commands.is_valid({**request, "request": {**request["request"], "resourcez": {"CPU": 1}}})
    assert not commands.is_valid({**request, "request": {**request["request"], "resources": {"CPU": -1}}})
    assert load("commands.json")["$defs"]["ScheduleRequest"]["additionalProperties"] is False


def refs_in(schema: Any) -> list[str]:
    """The `$defs` names a schema (or any part of one) refers to."""
    if isinstance(schema, list):
        return [name for item in schema for name in refs_in(item)]
    if not isinstance(schema, dict):
        return []
    own = [schema["$ref"].removeprefix("#/$defs/")] if "$ref" in schema else []
    return own + [name for value in schema.values() for name in refs_in(value)]


def reachable_defs(defs: dict[str, Any], roots: tuple[str, ...]) -> set[str]:
    """The `$defs` names `roots` refer to, directly or through other definitions (roots included)."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += refs_in(defs[name])
    return seen


def test_every_field_of_a_request_file_is_described_in_the_schema() -> None:
    defs = load("commands.json")["$defs"]
    request_types = reachable_defs(defs, ("ScheduleRequest", "PlacementGroupRequest", "VirtualCluster"))
    assert {
        "FallbackOption",
        "RunAfter",
        "ActorAffinityMatchExpression",
        "LabelMatch",
        "FixedSizeNode",
    } <= request_types
    undescribed = [name for name in request_types if not defs[name].get("description")]
    undescribed += [
        f"{name}.{field}"
        for name in request_types
        for field, schema in defs[name].get("properties", {}).items()
        if not schema.get("description", "").strip()
    ]
    assert sorted(undescribed) == []
