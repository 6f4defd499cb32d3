"""Liveness under any interleaving: registrations, the operator's label and taint edits, heartbeats lapsing and
returning, deaths, work that tolerates dead nodes for a while, virtual nodes carved from silent nodes. The live view
equals a replay of its log and a snapshot taken anywhere plus the tail: labels, taints, layers and liveness."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import AnyEvent, Taint
from services.core import Cluster
from services.core.errors import RejectedError
from services.core.labels import UNREACHABLE_TAINT
from services.core.liveness import Silence, liveness_event
from services.core.node_events import labels_changed
from services.core.state import replay
from services.core.state.layers import layers_of
from services.core.state.snapshot import decode, digest, dump, encode, restore
from tests.core.builders import make_actor
from tests.core.vc_builders import fixed, spec
from tests.support.examples import examples

NODES = ("n0", "n1", "n2")
TIMEOUT, GRACE = 10.0, 30.0


@dataclass(frozen=True)
class Step:
    """One thing that happens: `kind` with a node (`pick`) and a number of seconds or CPUs (`amount`)."""

    kind: str
    pick: int
    amount: float


steps = st.lists(
    st.builds(
        Step,
        st.sampled_from(["register", "remove", "taint", "untaint", "silence", "heard", "submit", "tolerant", "carve"]),
        st.integers(0, len(NODES) - 1),
        st.sampled_from([0.0, 1.0, 5.0, 11.0, 31.0, 45.0, 100.0]),
    ),
    max_size=30,
)


def happen(cluster: Cluster, step: Step, index: int, clocks: dict[str, float]) -> list[AnyEvent]:
    """Apply one step; the events another writer (labels) appended for it, then what the cluster reacted with. What
    the core refuses changes nothing."""
    node_id = NODES[step.pick]
    live = node_id in cluster.view.nodes
    try:
        if step.kind == "register" and not live:
            cluster.add_node(
                node_id, {"CPU": 4}, {"pool": f"p{step.pick}"}, [Taint("agent", "yes", "PreferNoSchedule")]
            )
            clocks[node_id] = 0.0
        elif step.kind == "remove" and live:
            cluster.remove_node(node_id)
        elif step.kind in ("label", "unlabel") and live:
            edit = {"owner": f"o{index}"} if step.kind == "label" else {}
            removed = ["pool"] if step.kind == "unlabel" else []
            relabelled = labels_changed(cluster.view, node_id, edit, merge=True, remove=removed, overwrite=True)
            return [relabelled, *cluster.fold(relabelled)]
        elif step.kind == "taint" and live:
            cluster.add_taints(node_id, [Taint("ops", str(index), "NoSchedule")])
        elif step.kind == "untaint" and live:
            cluster.remove_taints(node_id, ["ops"])
        elif step.kind in ("silence", "heard") and live:
            clocks[node_id] = clocks.get(node_id, 0.0) + step.amount
            silent = clocks[node_id]
            silence = Silence(
                silent_for=silent,
                last_heard=1_795_870_000.0 + index,
                heard_again=step.kind == "heard",
                unreachable_for=max(0.0, silent - TIMEOUT),
                dead_for=max(0.0, silent - TIMEOUT - GRACE),
            )
            event = liveness_event(cluster.view, node_id, silence, TIMEOUT, GRACE)
            if step.kind == "heard":
                clocks[node_id] = 0.0
            if event is not None:
                return [event, *cluster.fold(event)]
        elif step.kind == "submit":
            cluster.submit(make_actor(f"a{index}", 1, max_restarts=1))
        elif step.kind == "tolerant":
            cluster.submit(
                make_actor(
                    f"t{index}",
                    1,
                    tolerations={UNREACHABLE_TAINT: "exists()"},
                    toleration_seconds={UNREACHABLE_TAINT: step.amount} if step.amount < 100 else {},
                    max_restarts=-1,
                )
            )
        elif step.kind == "carve":
            cluster.create_virtual_cluster(f"vc{index}", spec(fixed(1.0)))
    except RejectedError:
        pass
    return []


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, st.integers(0, 30))
def test_liveness_folds_the_same_live_replayed_and_resumed_from_any_snapshot(script: list[Step], at_step: int) -> None:
    cluster = Cluster()
    clocks: dict[str, float] = {}
    log: list[AnyEvent] = []
    blob, at = encode(dump(cluster.view, 0)), 0
    for index, step in enumerate(script):
        happened = cluster.decided(lambda: happen(cluster, step, index, clocks))  # noqa: B023 - called at once
        log += happened.result + happened.events
        if index == at_step:
            blob, at = encode(dump(cluster.view, len(log))), len(log)
    live = digest(cluster.view)
    replayed = replay(log)
    assert digest(replayed) == live
    resumed = restore(decode(blob))
    for event in log[at:]:
        resumed.fold(event)
    assert digest(resumed) == live
    for node_id, node in cluster.view.nodes.items():
        for view in (replayed, resumed):
            twin = view.nodes[node_id]
            assert (twin.labels, twin.taints, layers_of(twin), twin.unreachable_since, twin.dead_for) == (
                node.labels,
                node.taints,
                layers_of(node),
                node.unreachable_since,
                node.dead_for,
            )
