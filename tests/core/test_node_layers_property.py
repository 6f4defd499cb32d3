"""Any interleaving of registrations, operator edits, deaths and removals: the live view, a full replay and a
replay from every snapshot agree on each node's labels and taints, and the operator's edits are what the operator
last did (a model kept apart from the code says what that is)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import AnyEvent, NodeDied, Taint
from services.core.errors import RejectedError
from services.core.node_events import labels_changed, node_registered, taints_added, taints_removed
from services.core.state import ClusterView
from services.core.state.snapshot import decode, digest, dump, encode, restore
from tests.support.examples import examples

NODES = ["n0", "n1"]
KEYS = ["a", "b", "c"]
VALUES = ["x", "y"]
TAINTS = [Taint(key, value, effect) for key in KEYS for value in VALUES for effect in ("NoSchedule", "NoExecute")]

label_maps = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)
taint_lists = st.lists(st.sampled_from(TAINTS), max_size=3, unique_by=lambda taint: (taint.key, taint.effect))
steps = st.one_of(
    st.tuples(st.just("register"), st.sampled_from(NODES), label_maps, taint_lists),
    st.tuples(st.sampled_from(["died", "removed"]), st.sampled_from(NODES)),
    st.tuples(st.just("set"), st.sampled_from(NODES), label_maps, st.booleans()),
    st.tuples(st.just("unlabel"), st.sampled_from(NODES), st.sampled_from(KEYS)),
    st.tuples(st.just("replace"), st.sampled_from(NODES), label_maps),
    st.tuples(st.just("taint"), st.sampled_from(NODES), st.sampled_from(TAINTS)),
    st.tuples(st.just("untaint"), st.sampled_from(NODES), st.sampled_from(KEYS)),
)

REMOVED = None
"""The model's mark of a key or taint the operator removed (and that stays removed)."""


@dataclass
class Model:
    """What the operator last did to each node, and what its agent last declared."""

    agent_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    agent_taints: dict[str, list[Taint]] = field(default_factory=dict)
    labels: dict[str, dict[str, str | None]] = field(default_factory=dict)
    taints: dict[str, dict[tuple[str, str], Taint | None]] = field(default_factory=dict)

    def expected_labels(self, node_id: str) -> dict[str, str]:
        edits = self.labels.get(node_id, {})
        kept = {key: value for key, value in self.agent_labels[node_id].items() if key not in edits}
        return kept | {key: value for key, value in edits.items() if value is not REMOVED}

    def expected_taints(self, node_id: str) -> set[Taint]:
        edits = self.taints.get(node_id, {})
        kept = {taint for taint in self.agent_taints[node_id] if (taint.key, taint.effect) not in edits}
        return kept | {taint for taint in edits.values() if taint is not REMOVED}


def user(labels: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in labels.items() if not key.startswith("corral.io/")}


def play(view: ClusterView, model: Model, step: tuple[object, ...]) -> list[AnyEvent]:
    """The events of one step (none when it is refused), and the model updated as the operator meant."""
    kind, node_id = step[0], str(step[1])
    node = view.nodes.get(node_id)
    if kind == "register":
        labels, taints = step[2], step[3]
        assert isinstance(labels, dict) and isinstance(taints, list)
        if node is not None:
            return []
        model.agent_labels[node_id], model.agent_taints[node_id] = dict(labels), list(taints)
        return [node_registered(view, node_id, {"CPU": 1}, labels, taints)]
    if node is None:
        return []
    if kind in ("died", "removed"):
        if kind == "removed":
            model.labels.pop(node_id, None)
            model.taints.pop(node_id, None)
        return [NodeDied(node_id=node_id, removed=kind == "removed")]
    try:
        return [relabel(view, model, step) if kind in ("set", "unlabel", "replace") else retaint(view, model, step)]
    except RejectedError:
        return []


def relabel(view: ClusterView, model: Model, step: tuple[object, ...]) -> AnyEvent:
    """An operator's label edit, noted in the model as the operator meant it once the command is accepted."""
    kind, node_id, what = step[0], str(step[1]), step[2]
    edits, agent = model.labels.setdefault(node_id, {}), model.agent_labels[node_id]
    if kind == "unlabel":
        key = str(what)
        event = labels_changed(view, node_id, {}, merge=True, remove=[key])
        if key in agent or (key in edits and edits[key] is REMOVED):
            edits[key] = REMOVED
        else:
            edits.pop(key, None)
        return event
    assert isinstance(what, dict)
    if kind == "set":
        event = labels_changed(view, node_id, what, merge=True, overwrite=bool(step[3]))
        edits.update(what)
        return event
    event = labels_changed(view, node_id, what)
    gone = {*agent, *(key for key, value in edits.items() if value is REMOVED)} - set(what)
    edits.clear()
    edits.update({**what, **dict.fromkeys(gone, REMOVED)})
    return event


def retaint(view: ClusterView, model: Model, step: tuple[object, ...]) -> AnyEvent:
    """An operator's taint edit, noted in the model as the operator meant it once the command is accepted."""
    kind, node_id, what = step[0], str(step[1]), step[2]
    edits = model.taints.setdefault(node_id, {})
    if kind == "taint":
        assert isinstance(what, Taint)
        event = taints_added(view, node_id, [what])
        edits[(what.key, what.effect)] = what
        return event
    key = str(what)
    event = taints_removed(view, node_id, [key])
    for named in [named for named, edit in edits.items() if named[0] == key and edit is not REMOVED]:
        del edits[named]
    edits.update({(t.key, t.effect): REMOVED for t in model.agent_taints[node_id] if t.key == key})
    return event


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(steps, max_size=30))
def test_any_interleaving_keeps_the_operators_edits_through_replays_and_snapshots(
    plan: list[tuple[object, ...]],
) -> None:
    view, model = ClusterView(), Model()
    events: list[AnyEvent] = []
    snapshots: list[tuple[int, bytes]] = [(0, encode(dump(view)))]
    for step in plan:
        for event in play(view, model, step):
            view.fold(event, float(len(events)))
            events.append(event)
            snapshots.append((len(events), encode(dump(view))))
        for node_id, node in view.nodes.items():
            assert user(node.labels) == model.expected_labels(node_id), step
            assert set(node.taints) == model.expected_taints(node_id), step
    live = digest(view)
    for point, blob in snapshots:  # the first: the empty view, so a full replay
        resumed = restore(decode(blob))
        for at, event in enumerate(events[point:], start=point):
            resumed.fold(event, float(at))
        assert digest(resumed) == live
        assert {n: (node.labels, node.taints) for n, node in resumed.nodes.items()} == {
            n: (node.labels, node.taints) for n, node in view.nodes.items()
        }
