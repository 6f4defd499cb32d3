"""Explanations that do not mislead: a selector key no node has, work the autoscaler is launching for, and the
CLI's spelling of selectors and amounts in messages (never Python reprs)."""

from __future__ import annotations

from schemas import AutoscalerElected, Exists, LabelMatch, NodeRegistered, ScheduleRequest, SelectorValue
from services.core import Cluster
from services.core.autoscale.plan_types import DemandGroup
from services.core.selectors import selector_text
from services.core.state.snapshot import dump, restore


def test_a_selector_on_a_key_no_node_has_says_so_and_suggests_the_closest_key() -> None:
    cluster = Cluster()
    for index in range(3):
        cluster.fold(NodeRegistered(node_id=f"n{index}", resources={"CPU": 4}, labels={"disk": "ssd"}))
    cluster.submit(ScheduleRequest("typo", {"CPU": 1}, label_selector={"dsik": "ssd"}))
    cluster.submit(ScheduleRequest("value", {"CPU": 1}, label_selector={"disk": "nvme"}))
    typo, value = cluster.pending()
    assert typo.message == (
        "0/3 nodes are available: 3 node(s) didn't match the label selector; "
        "no node has a label key 'dsik' (did you mean 'disk'?)."
    )
    assert "no node has" not in value.message  # the key exists: only the value is wrong


def test_a_key_only_an_autoscaler_node_type_has_is_not_unknown_and_is_suggested() -> None:
    cluster = Cluster()
    cluster.fold(NodeRegistered(node_id="n0", resources={"CPU": 4}, labels={"disk": "ssd"}))
    types = {"gpu-a100": {"accelerator": "a100"}, "cpu-4": {}}
    cluster.fold(AutoscalerElected(instance="autoscaler", epoch=1, node_type_labels=types))
    cluster.submit(ScheduleRequest("launchable", {"CPU": 1}, label_selector={"accelerator": "a100"}))
    cluster.submit(ScheduleRequest("typo", {"CPU": 1}, label_selector={"accelerater": "a100"}))
    launchable, typo = cluster.pending()
    assert "has a label key" not in launchable.message
    assert typo.message.endswith(
        "no node or node type of the autoscaler has a label key 'accelerater' (did you mean 'accelerator'?)."
    )
    assert restore(dump(cluster.view, 9)).node_type_labels == types, "kept by snapshots"


def test_selectors_are_spelled_as_the_cli_takes_them() -> None:
    spec: dict[str, SelectorValue] = {"tier": "db", "zone": "in(z1,z2)", "gpu": Exists(), "spot": "!true"}
    spec["os"] = LabelMatch("not_in", ("a", "b"))
    assert selector_text(spec) == "gpu=exists(),os=!in(a,b),spot!=true,tier=db,zone=in(z1,z2)"


def test_the_autoscalers_demand_line_has_no_python_reprs() -> None:
    group = DemandGroup(
        kind="actor",
        shape=({"CPU": 1, "memory": 2**33},),
        selectors=(({"tier": "db"},),),
        tolerations={"gpu": Exists()},
        strategy="",
        work_ids=("a",),
        unmet=0,
        served_by=(),
        reasons={},
    )
    assert (
        group.describe()
        == "1 x actor {CPU: 1, memory: 8Gi} selector tier=db tolerates gpu=exists(): fits on existing nodes"
    )
