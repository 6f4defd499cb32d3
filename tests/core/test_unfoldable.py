"""Every fold is all or nothing: an event that cannot be folded raises `UnfoldableEventError` and changes nothing."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import (
    ActorFailed,
    ActorPending,
    ActorPlaced,
    ActorRemoved,
    ActorSubmitted,
    AnyEvent,
    AutoscalerElected,
    Explanation,
    LaunchesNominated,
    NodeDied,
    NodeDrainCancelled,
    NodeDrainStarted,
    NodeLabelsChanged,
    NodeLaunchFailed,
    NodeRegistered,
    NodesLaunchRequested,
    NodeTerminationRequested,
    PlacementGroupBundlesLost,
    PlacementGroupPending,
    PlacementGroupPlaced,
    PlacementGroupRemoved,
    PlacementGroupRequest,
    PlacementGroupSchedulingStrategy,
    PlacementGroupSubmitted,
    SchedulerElected,
    ScheduleRequest,
    Taint,
    TaintsChanged,
    VirtualClusterDestroyed,
    VirtualClusterDestroyRequested,
    VirtualClusterQueued,
    VirtualClusterRequested,
    VirtualNodeGrant,
    VirtualNodeResized,
    VirtualNodeSize,
    VirtualNodesReserved,
)
from services.autoscaler.view import AutoscalerView
from services.core import Cluster, UnfoldableEventError, replay
from services.core.labels import LAUNCH_ID
from services.core.state import ClusterView
from services.core.state.snapshot import digest, dump, encode
from services.labels.view import LabelsView
from services.runtime.views import dump_view
from services.scheduler.view import SchedulerView
from services.taints.view import TaintsView
from services.vclusters.view import VClustersView
from tests.core.builders import make_actor, make_cluster
from tests.core.vc_builders import fixed, spec
from tests.support.examples import examples

SETTINGS = settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def plain_cluster() -> Cluster:
    """Nodes (one dead), placed, pending and bundled actors, a placed and a pending placement group."""
    cluster = make_cluster(4, cpu=4)
    cluster.submit(make_actor("a0", 2))
    cluster.submit(make_actor("a1", 1, max_restarts=-1))
    cluster.submit(make_actor("big", 64))
    cluster.create_placement_group(
        PlacementGroupRequest("g0", [{"CPU": 1}, {"CPU": 1}], fallback_strategy=[{"bundles": [{"CPU": 1}]}])
    )
    cluster.create_placement_group(
        PlacementGroupRequest("huge", [{"CPU": 64}], fallback_strategy=[{"bundles": [{"CPU": 32}]}])
    )
    cluster.submit(make_actor("in-g0", 1, scheduling_strategy=PlacementGroupSchedulingStrategy("g0", 0)))
    cluster.remove_node("n3")
    return cluster


def virtual_cluster() -> Cluster:
    """The plain cluster plus a cluster with fixed and flexible virtual nodes, a nested one and a queued one."""
    cluster = plain_cluster()
    cluster.add_node("n4", {"CPU": 16, "GPU": 2}, zone="z1")
    cluster.create_virtual_cluster("team", spec(fixed(2), min_cpu=2, max_cpu=10))
    cluster.create_virtual_cluster("sub", spec(min_cpu=1, max_cpu=2), parent="team")
    cluster.create_virtual_cluster("later", spec(min_cpu=100))
    cluster.submit(make_actor("v0", 1, vcluster_id="team"))
    cluster.submit(make_actor("v1", 2, vcluster_id="team"))
    cluster.submit(make_actor("s0", 1, vcluster_id="sub"))
    cluster.create_placement_group(PlacementGroupRequest("vg", [{"CPU": 1}], vcluster_id="team"))
    return cluster


def autoscaled_cluster() -> Cluster:
    """The plain cluster plus an autoscaler's launches: one registered and draining, one still launching."""
    cluster = plain_cluster()
    cluster.fold(AutoscalerElected(instance="as", epoch=1), react=False)
    cluster.fold(NodesLaunchRequested(node_type="cpu-4", launch_ids=["L1", "L2"], reason="pending work", work=["big"]))
    cluster.fold(NodeRegistered(node_id="n9", resources={"CPU": 4.0}, labels={LAUNCH_ID: "L1"}), react=False)
    cluster.fold(NodeDrainStarted(node_id="n9", launch_id="L1", reason="idle"), react=False)
    return cluster


BASES = {
    "plain": plain_cluster().events(),
    "virtual": virtual_cluster().events(),
    "autoscaled": autoscaled_cluster().events(),
}
"""The logs of the valid clusters the generated events are folded into."""


def _ids_of(events: list[AnyEvent]) -> tuple[set[str], set[str], set[str], set[str]]:
    view = replay(events)
    scopes = [view, *(vc.scope for vc in view.tree.clusters.values())]
    nodes = {node for scope in scopes for node in [*scope.nodes, *scope.dead]}
    actors = {actor for scope in scopes for actor in scope.actors}
    groups = {group for scope in scopes for group in scope.groups}
    return nodes, actors, groups, set(view.tree.clusters)


_known = [_ids_of(events) for events in BASES.values()]
NODES = sorted({"ghost", *(n for ids in _known for n in ids[0])})
ACTORS = sorted({"ghost", "a0", "new", *(a for ids in _known for a in ids[1])})
GROUPS = sorted({"ghost", "g0", "new", *(g for ids in _known for g in ids[2])})
CLUSTERS = sorted({"", "ghost", *(c for ids in _known for c in ids[3])})

node_ids = st.sampled_from(NODES)
actor_ids = st.sampled_from(ACTORS)
group_ids = st.sampled_from(GROUPS)
cluster_ids = st.sampled_from(CLUSTERS)
optional_clusters = st.one_of(st.none(), cluster_ids)
quantities = st.sampled_from([0.0, 0.5, 1.0, 2.0, 4.0, 100.0])
amounts = st.dictionaries(st.sampled_from(["CPU", "GPU"]), quantities, max_size=2)
indices = st.integers(-2, 3)
labels = st.dictionaries(st.sampled_from(["disk", "tier"]), st.sampled_from(["ssd", "web"]), max_size=2)
taints = st.lists(st.builds(Taint, st.sampled_from(["gpu", "x"]), st.just("true"), st.just("NoExecute")), max_size=1)
explanations = st.builds(Explanation, st.just(0), st.just("waits"))
requests = st.builds(ScheduleRequest, actor_ids, amounts, labels=labels, vcluster_id=optional_clusters)
group_requests = st.builds(
    PlacementGroupRequest,
    group_ids,
    st.lists(amounts, max_size=3),
    fallback_strategy=st.lists(st.builds(dict, bundles=st.lists(amounts, max_size=3)), max_size=1),
    vcluster_id=optional_clusters,
)
sizes = st.builds(VirtualNodeSize, cluster_ids, node_ids, node_ids, amounts)
grants = st.builds(VirtualNodeGrant, node_ids, node_ids, amounts, slot=indices)
envelope = {"event_id": st.sampled_from(["", "e1"]), "epoch": st.integers(0, 2)}
launch_ids = st.sampled_from(["L1", "L2", "ghost", ""])
at = st.sampled_from([0.0, 1.0, -1.0, 1e300])

events = st.one_of(
    st.builds(NodeRegistered, node_id=node_ids, resources=amounts, labels=labels, taints=taints, **envelope),
    st.builds(NodeDied, node_id=node_ids, **envelope),
    st.builds(NodeLabelsChanged, node_id=node_ids, labels=labels, **envelope),
    st.builds(TaintsChanged, node_id=node_ids, taints=taints, **envelope),
    st.builds(ActorSubmitted, request=requests, **envelope),
    st.builds(
        ActorPlaced,
        actor_id=actor_ids,
        node_id=node_ids,
        placement_group_id=st.sampled_from(["", *GROUPS]),
        bundle_index=indices,
        request=st.one_of(st.none(), requests),
        resized=st.lists(sizes, max_size=2),
        **envelope,
    ),
    st.builds(ActorPending, actor_id=actor_ids, explanation=explanations, **envelope),
    st.builds(ActorFailed, actor_id=actor_ids, node_id=node_ids, reason=st.just("x"), will_restart=st.booleans()),
    st.builds(ActorRemoved, actor_id=actor_ids, resized=st.lists(sizes, max_size=2), **envelope),
    st.builds(PlacementGroupSubmitted, request=group_requests, **envelope),
    st.builds(
        PlacementGroupPlaced, pg_id=group_ids, bundle_nodes=st.lists(node_ids, max_size=3), option=indices, **envelope
    ),
    st.builds(PlacementGroupPending, pg_id=group_ids, explanation=explanations, **envelope),
    st.builds(
        PlacementGroupBundlesLost, pg_id=group_ids, bundle_indices=st.lists(indices, max_size=2), reason=st.just("x")
    ),
    st.builds(PlacementGroupRemoved, pg_id=group_ids, **envelope),
    st.builds(SchedulerElected, instance=st.just("s"), **envelope),
    st.builds(VirtualClusterRequested, vc_id=cluster_ids, spec=st.just(spec(min_cpu=1)), parent=cluster_ids),
    st.builds(VirtualClusterQueued, vc_id=cluster_ids, reason=st.just("waits"), **envelope),
    st.builds(VirtualNodesReserved, vc_id=cluster_ids, vnodes=st.lists(grants, max_size=2), **envelope),
    st.builds(VirtualNodeResized, vc_id=cluster_ids, vnode_id=node_ids, parent_node=node_ids, resources=amounts),
    st.builds(VirtualClusterDestroyRequested, vc_id=cluster_ids, force=st.booleans()),
    st.builds(VirtualClusterDestroyed, vc_id=cluster_ids, stopped=st.just([]), **envelope),
    st.builds(AutoscalerElected, instance=st.just("as"), **envelope),
    st.builds(
        NodesLaunchRequested,
        node_type=st.sampled_from(["cpu-4", ""]),
        launch_ids=st.lists(launch_ids, max_size=2),
        reason=st.just("x"),
        work=st.lists(actor_ids, max_size=2),
        requested_at=at,
        nominated=st.dictionaries(launch_ids, st.dictionaries(st.one_of(actor_ids, group_ids), amounts), max_size=2),
        **envelope,
    ),
    st.builds(
        LaunchesNominated,
        nominated=st.dictionaries(launch_ids, st.dictionaries(st.one_of(actor_ids, group_ids), amounts), max_size=2),
        existing=st.dictionaries(
            launch_ids, st.dictionaries(node_ids, st.dictionaries(group_ids, amounts), max_size=2), max_size=2
        ),
        **envelope,
    ),
    st.builds(NodeLaunchFailed, launch_id=launch_ids, reason=st.just("x"), failed_at=at, **envelope),
    st.builds(NodeDrainStarted, node_id=node_ids, launch_id=launch_ids, reason=st.just("x"), at=at, **envelope),
    st.builds(NodeDrainCancelled, node_id=node_ids, launch_id=launch_ids, reason=st.just("x"), at=at, **envelope),
    st.builds(NodeTerminationRequested, node_id=node_ids, launch_id=launch_ids, reason=st.just("x"), requested_at=at),
)


def state_of(view: ClusterView) -> tuple[str, bytes]:
    """What must not change when an event is refused: the digest and the snapshot bytes."""
    return digest(view), encode(dump(view, 7))


@SETTINGS
@given(base=st.sampled_from(sorted(BASES)), event=events, then=events)
def test_any_event_folds_whole_or_not_at_all(base: str, event: AnyEvent, then: AnyEvent) -> None:
    """Any event (and a second one after it) on a valid cluster: folded, or refused with the view unchanged."""
    view = replay(BASES[base])
    for each in (event, then):
        before = state_of(view)
        try:
            view.fold(each)
        except UnfoldableEventError:
            assert state_of(view) == before, f"refusing {each} changed the view"


def service_views() -> dict[
    str, Callable[[], LabelsView | TaintsView | VClustersView | SchedulerView | AutoscalerView]
]:
    return {
        "labels": lambda: LabelsView(clock=lambda: 0.0),
        "taints": TaintsView,
        "vclusters": VClustersView,
        "scheduler": lambda: SchedulerView(0, ()),
        "autoscaler": AutoscalerView,
    }


SNAPSHOTS = {name: dump_view(replay(events), len(events)) for name, events in BASES.items()}


@SETTINGS
@given(base=st.sampled_from(sorted(BASES)), service=st.sampled_from(sorted(service_views())), event=events)
def test_every_service_view_folds_an_event_whole_or_not_at_all(base: str, service: str, event: AnyEvent) -> None:
    """Each service's view, loaded from a snapshot of a valid cluster, folds any event whole or refuses it."""
    view = service_views()[service]()
    sequence = len(BASES[base])
    view.load(SNAPSHOTS[base], sequence)
    before = (view.digest(), view.dump(sequence))
    try:
        view.fold(event, sequence + 1)
    except UnfoldableEventError:
        assert (view.digest(), view.dump(sequence)) == before, f"refusing {event} changed the {service} view"


PLAIN = BASES["plain"]
VIRTUAL = BASES["virtual"]


@pytest.mark.parametrize(
    ("events", "event", "rule"),
    [
        (PLAIN, ActorPlaced(actor_id="new", node_id="nowhere", request=make_actor("new")), "'nowhere': not a node"),
        (PLAIN, ActorPlaced(actor_id="ghost", node_id="n0"), "'ghost': no such live actor"),
        (PLAIN, ActorPlaced(actor_id="big", node_id="n0"), r"'CPU': 64\S*\} does not fit"),
        (PLAIN, ActorPlaced(actor_id="a1", node_id="n1"), "'a1': is placed on node"),
        (PLAIN, ActorPlaced(actor_id="big", node_id="n0", placement_group_id="g0", bundle_index=5), "bundle_index 5"),
        (PLAIN, ActorPlaced(actor_id="big", node_id="n3", placement_group_id="g0", bundle_index=1), "not on .n3."),
        (PLAIN, ActorSubmitted(request=make_actor("a1")), "'a1': a live actor has this id"),
        (PLAIN, ActorRemoved(actor_id="ghost"), "'ghost': no such live actor"),
        (PLAIN, PlacementGroupPlaced(pg_id="huge", bundle_nodes=["n0", "n1"]), "2 nodes for 1 bundles"),
        (PLAIN, PlacementGroupPlaced(pg_id="huge", bundle_nodes=["n0"], option=1), r"'CPU': 32\S*\} does not fit"),
        (PLAIN, PlacementGroupPlaced(pg_id="huge", bundle_nodes=["n0"], option=2), "option 2"),
        (PLAIN, PlacementGroupPlaced(pg_id="g0", bundle_nodes=["n0"], option=1), r"bundles \[0, 1\] of option 0"),
        (PLAIN, PlacementGroupBundlesLost(pg_id="g0", bundle_indices=[0, 7], reason="x"), "no bundle 7"),
        (PLAIN, PlacementGroupRemoved(pg_id="ghost"), "'ghost': no such live placement group"),
        (
            BASES["autoscaled"],
            LaunchesNominated(nominated={"L2": {"big": {"CPU": 4}}, "ghost": {"big": {"CPU": 4}}}),
            "launch 'ghost' was never asked for",
        ),
        (
            BASES["autoscaled"],
            LaunchesNominated(nominated={}, existing={"ghost": {"n0": {"big": {"CPU": 4}}}}),
            "existing: launch 'ghost' was never asked for",
        ),
        (VIRTUAL, VirtualClusterRequested(vc_id="orphan", spec=spec(), parent="ghost"), "parent 'ghost'"),
        (VIRTUAL, VirtualClusterDestroyed(vc_id="team"), r"its clusters \['sub'\] are not destroyed"),
        (
            VIRTUAL,
            VirtualNodesReserved(vc_id="later", vnodes=[VirtualNodeGrant("later-0", "nowhere", {"CPU": 1})]),
            "'nowhere': not a node of the root cluster",
        ),
        (
            VIRTUAL,
            ActorRemoved(actor_id="v0", resized=[VirtualNodeSize("team", "team-flex-ghost", "ghost", {"CPU": 1})]),
            "'ghost': not a node of the root cluster to carve from",
        ),
    ],
    ids=[
        "an actor placed as submitted on an unknown node is not submitted either",
        "an unknown actor cannot be placed",
        "an actor that does not fit its node is not placed",
        "a placed actor cannot be placed again",
        "an actor cannot be placed in a bundle the group does not have",
        "an actor in a bundle goes to the node holding the bundle",
        "a live actor cannot be submitted again",
        "an unknown actor cannot be removed",
        "a group's bundles need one node each",
        "a group's fallback bundles must fit",
        "a group has no option past its fallbacks",
        "a group cannot switch options while it holds bundles",
        "a group cannot lose a bundle it does not have",
        "an unknown group cannot be removed",
        "work cannot be nominated to a launch never asked for, nor with it to the others",
        "an existing node's room cannot be held for a launch never asked for",
        "a cluster cannot be requested under an unknown parent",
        "a cluster cannot be destroyed before its children",
        "a virtual node cannot be carved from an unknown node",
        "a removal whose shrink would carve from an unknown node is not removed either",
    ],
)
def test_an_unfoldable_event_is_refused_whole_with_the_rule_it_breaks(
    events: list[AnyEvent], event: AnyEvent, rule: str
) -> None:
    view = replay(events)
    before = state_of(view)
    with pytest.raises(UnfoldableEventError, match=rule):
        view.fold(event)
    assert state_of(view) == before


def test_an_actor_placed_on_an_unknown_node_leaves_the_actor_unknown_and_the_log_folds_on() -> None:
    """The half-applied case that started this: a placement with its request was submitted, then failed."""
    view = replay(PLAIN)
    with pytest.raises(UnfoldableEventError, match="ActorPlaced e9: node_id 'nowhere'"):
        view.fold(ActorPlaced(actor_id="new", node_id="nowhere", request=make_actor("new"), event_id="e9"))
    assert "new" not in view.actors and "new" not in view.pending
    view.fold(ActorPlaced(actor_id="new", node_id="n0", request=make_actor("new")))
    assert view.actors["new"].node_id == "n0"


def test_a_skipped_event_leaves_a_replay_equal_to_a_replay_without_it() -> None:
    """Every reader skips the same event the same way: the view is the one the log without it gives."""
    bad = ActorPlaced(actor_id="new", node_id="nowhere", request=make_actor("new"))
    view = ClusterView()
    for event in [*PLAIN[:6], bad, *PLAIN[6:]]:
        with contextlib.suppress(UnfoldableEventError):
            view.fold(event)
    assert digest(view) == digest(replay(PLAIN))


def test_a_leader_folds_a_foreign_event_of_its_own_epoch_as_every_follower_does() -> None:
    """Only the bus's stand-in marks the leader's own events: anything else in the log is folded by it too."""
    leader, follower = SchedulerView(0, ()), SchedulerView(0, ())
    log: list[AnyEvent] = [
        NodeRegistered(node_id="n0", resources={"CPU": 4}, labels={}),
        SchedulerElected(instance="s", epoch=1),
        ActorSubmitted(request=make_actor("forged", 1), epoch=1),
    ]
    for view in (leader, follower):
        for sequence, event in enumerate(log[:2], 1):
            view.fold(event, sequence)
    leader.lead(1, "s")
    for view in (leader, follower):
        view.fold(log[2], 3)
    assert "forged" in leader.cluster.view.actors
    assert leader.digest() == follower.digest()
