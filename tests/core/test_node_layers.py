"""A node's labels and taints in layers: the agent's declaration, replaced when it registers again, under an
operator's edits, which hold until an operator changes them or removes the node."""

from __future__ import annotations

import msgspec

from schemas import (
    AnyEvent,
    NodeDied,
    NodeLabelsChanged,
    NodeRegistered,
    OperatorLabels,
    OperatorTaints,
    Taint,
    TaintsChanged,
)
from services.core.labels import SCALE_DOWN_TAINT
from services.core.node_events import labels_changed, node_registered, taints_added, taints_removed
from services.core.state import ClusterView, replay
from services.core.state.snapshot import decode, digest, dump, encode, restore

TEAM = Taint("team", "ml", "NoSchedule")
AGENT_TAINT = Taint("disk", "slow", "PreferNoSchedule")


class Log:
    """A view and the events folded into it, in order (what the log would hold)."""

    def __init__(self) -> None:
        self.view = ClusterView()
        self.events: list[AnyEvent] = []
        self.time = 0.0

    def fold(self, event: AnyEvent) -> None:
        self.time += 1.0
        self.events.append(event)
        self.view.fold(event, self.time)

    def register(self, labels: dict[str, str], taints: list[Taint], node_id: str = "n2") -> NodeRegistered:
        event = node_registered(self.view, node_id, {"CPU": 4}, labels, taints, now=self.time + 1)
        self.fold(event)
        return event


def operated_node() -> Log:
    """n2 registered by its agent (owner-less, with labels disk=ssd and rack=r1, taint disk), then an operator
    labels it owner=alice, removes rack and taints it team=ml:NoSchedule."""
    log = Log()
    log.register({"disk": "ssd", "rack": "r1"}, [AGENT_TAINT])
    log.fold(labels_changed(log.view, "n2", {"owner": "alice"}, merge=True, remove=["rack"]))
    log.fold(taints_added(log.view, "n2", [TEAM]))
    return log


def user(labels: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in labels.items() if not key.startswith("corral.io/")}


def test_an_operators_edits_survive_the_agent_registering_again_after_its_death() -> None:
    log = operated_node()
    log.fold(NodeDied(node_id="n2"))
    log.register({"disk": "nvme", "rack": "r1", "gpu": "a100"}, [])
    node = log.view.nodes["n2"]
    assert user(node.labels) == {"disk": "nvme", "gpu": "a100", "owner": "alice"}
    assert list(node.taints) == [TEAM]
    assert node.layers is not None
    assert node.layers.operator_labels == OperatorLabels({"owner": "alice"}, ["rack"])
    assert node.layers.operator_taints == OperatorTaints([TEAM], [])


def test_the_autoscalers_scale_down_taint_survives_a_registration_mid_drain() -> None:
    log = Log()
    log.register({}, [])
    scale_down = Taint(SCALE_DOWN_TAINT, "true", "NoSchedule")
    log.fold(taints_added(log.view, "n2", [scale_down]))
    log.fold(NodeDied(node_id="n2"))
    log.register({}, [])
    assert scale_down in log.view.nodes["n2"].taints


def test_an_operator_removing_an_agent_taint_keeps_it_removed() -> None:
    log = operated_node()
    log.fold(taints_removed(log.view, "n2", ["disk"]))
    log.fold(NodeDied(node_id="n2"))
    log.register({}, [AGENT_TAINT, Taint("disk", "slow", "NoSchedule")])
    assert log.view.nodes["n2"].taints == (Taint("disk", "slow", "NoSchedule"), TEAM)


def test_removing_the_node_forgets_the_operators_edits_and_its_return_says_so() -> None:
    log = operated_node()
    log.fold(NodeDied(node_id="n2", removed=True))
    again = log.register({"rack": "r1"}, [])
    assert again.removed_before == 1.0
    node = log.view.nodes["n2"]
    assert user(node.labels) == {"rack": "r1"}
    assert node.taints == ()
    assert log.register({}, [], node_id="n3").removed_before is None


def test_a_replacement_names_every_user_label_and_holds() -> None:
    log = operated_node()
    log.fold(labels_changed(log.view, "n2", {"tier": "web"}))
    log.fold(NodeDied(node_id="n2"))
    log.register({"disk": "ssd", "zone-hint": "a"}, [])
    assert user(log.view.nodes["n2"].labels) == {"tier": "web", "zone-hint": "a"}


def test_an_operator_setting_the_agents_own_value_keeps_it() -> None:
    log = Log()
    log.register({"disk": "ssd"}, [])
    log.fold(labels_changed(log.view, "n2", {"disk": "ssd"}, merge=True))
    log.fold(NodeDied(node_id="n2"))
    log.register({"disk": "hdd"}, [])
    assert log.view.nodes["n2"].labels["disk"] == "ssd"


def test_events_written_before_layers_fold_as_edits_over_the_agents_declaration() -> None:
    """An old event carries the node's full labels or taints: what differs from the agent's is the operator's."""
    log = Log()
    registered = log.register({"disk": "ssd", "rack": "r1"}, [AGENT_TAINT])
    system = {key: value for key, value in registered.labels.items() if key.startswith("corral.io/")}
    log.fold(NodeLabelsChanged(node_id="n2", labels={"disk": "ssd", "owner": "alice", **system}))
    log.fold(TaintsChanged(node_id="n2", taints=[TEAM]))
    node = log.view.nodes["n2"]
    assert node.layers is not None
    assert node.layers.operator_labels == OperatorLabels({"owner": "alice"}, ["rack"])
    assert node.layers.operator_taints == OperatorTaints([TEAM], [AGENT_TAINT])
    log.fold(NodeDied(node_id="n2"))
    log.register({"disk": "nvme", "rack": "r2"}, [AGENT_TAINT])
    assert user(log.view.nodes["n2"].labels) == {"disk": "nvme", "owner": "alice"}
    assert log.view.nodes["n2"].taints == (TEAM,)


def test_layers_come_back_from_a_snapshot_and_from_a_replay() -> None:
    log = operated_node()
    log.fold(NodeDied(node_id="n2"))
    restored = restore(decode(encode(dump(log.view, len(log.events)))))
    assert digest(restored) == digest(log.view) == digest(replay(log.events))
    again = node_registered(restored, "n2", {"CPU": 4}, {}, [])
    restored.fold(again)
    log.fold(again)
    assert restored.nodes["n2"].labels == log.view.nodes["n2"].labels
    assert restored.nodes["n2"].taints == (TEAM,)


def test_the_digest_tells_layers_apart() -> None:
    """Two views with the same effective labels but different layers differ (a replay would tell them apart)."""
    set_by_operator = Log()
    set_by_operator.register({}, [])
    set_by_operator.fold(labels_changed(set_by_operator.view, "n2", {"owner": "alice"}, merge=True))
    declared = Log()
    declared.register({"owner": "alice"}, [])
    assert set_by_operator.view.nodes["n2"].labels == declared.view.nodes["n2"].labels
    assert digest(set_by_operator.view) != digest(declared.view)


def test_an_old_event_and_its_layered_twin_give_the_same_labels() -> None:
    log = operated_node()
    layered = labels_changed(log.view, "n2", {"tier": "db"}, merge=True)
    old = msgspec.structs.replace(layered, operator=None)
    twin = restore(decode(encode(dump(log.view))))
    log.fold(layered)
    twin.fold(old)
    assert twin.nodes["n2"].labels == log.view.nodes["n2"].labels
