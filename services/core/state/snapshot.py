"""Dump a view to a `ViewSnapshot`, rebuild a view from one, and a canonical digest of a view (pure)."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Final, cast

import msgspec

from schemas.snapshots import (
    SNAPSHOT_VERSION,
    ActorRecord,
    GroupRecord,
    LaunchRecord,
    NodeRecord,
    VClusterRecord,
    ViewSnapshot,
    VNodeRecord,
)
from services.core.prng import stable_hash
from services.core.state.layers import layers_of
from services.core.state.model import (
    ENDED_LAUNCH_STATES,
    ActorState,
    GroupState,
    Launch,
    LaunchState,
    Layers,
    NodeState,
    WorkStatus,
    node_footprint,
)
from services.core.state.node_folds import restore_liveness
from services.core.state.nominations import rebuild
from services.core.state.tree import AdmissionStatus, VNode
from services.core.state.view import ClusterView, VClusterState, VTree, parent_scope

_CANONICAL: Final = msgspec.msgpack.Encoder(order="sorted")


def _node_record(node: NodeState, *, dead: bool) -> NodeRecord:
    layers = layers_of(node)
    return NodeRecord(
        node.node_id,
        node.address,
        node.total,
        node.free,
        node.labels,
        list(node.declared_taints),
        dead,
        unreachable_since=node.unreachable_since,
        dead_for=node.dead_for,
        layers=layers,
        removed_at=node.removed_at,
    )


def dump(view: ClusterView, sequence: int = 0) -> ViewSnapshot:
    """Everything `restore` needs to rebuild `view`, which reflects the log up to `sequence`; it shares the view's
    footprints, so encode it before the view changes."""
    nodes = [_node_record(view.nodes[n], dead=False) for n in sorted(view.nodes)]
    nodes += [_node_record(view.dead[n], dead=True) for n in sorted(view.dead)]
    actors = [
        ActorRecord(a.request, a.arrival, a.status, a.node_id, a.bundle, a.restarts, a.explanation)
        for _, a in sorted(view.actors.items())
    ]
    groups = [
        GroupRecord(g.request, g.arrival, g.status, g.option, g.bundle_nodes, g.bundle_free, g.explanation)
        for _, g in sorted(view.groups.items())
    ]
    return ViewSnapshot(
        snapshot_version=SNAPSHOT_VERSION,
        sequence=sequence,
        seed=view.seed,
        version=view.version,
        epoch=view.epoch,
        arrivals=view.arrivals,
        nodes=nodes,
        actors=actors,
        groups=groups,
        records=view.footprints,  # the canonical encoder sorts its keys: sorting 100,000 of them here cost 40 ms
        ended=list(view.ended),
        pending=sorted(view.pending),
        vclusters=[_vcluster_record(vc) for vc in _by_arrival(view)] if not view.scope_id else [],
        vcluster_arrivals=view.tree.arrivals if not view.scope_id else 0,
        launches=_launch_records(view),
        launch_count=view.launch_count,
        autoscaler_epoch=view.autoscaler_epoch,
        node_type_labels=view.node_type_labels,
    )


def _launch_records(view: ClusterView) -> list[LaunchRecord]:
    """Live launches by id, then the ended ones oldest first (the order `restore` keeps them in)."""
    ended = [view.launches[launch_id] for launch_id in view.ended_launches]
    live = [launch for _, launch in sorted(view.launches.items()) if launch.launch_id not in view.ended_launches]
    return [
        LaunchRecord(
            a.launch_id,
            a.node_type,
            a.requested_at,
            a.reason,
            list(a.work),
            a.state,
            a.node_id,
            a.note,
            a.changed_at,
            a.idle_since,
            {work_id: dict(amount) for work_id, amount in sorted(a.nominated.items())},
            {
                node_id: {work_id: dict(amount) for work_id, amount in sorted(put.items())}
                for node_id, put in sorted(a.existing.items())
            },
        )
        for a in live + ended
    ]


def _by_arrival(view: ClusterView) -> list[VClusterState]:
    return sorted(view.tree.clusters.values(), key=lambda vc: vc.arrival)


def _vcluster_record(vc: VClusterState) -> VClusterRecord:
    vnodes = [
        VNodeRecord(v.vnode_id, v.parent_node, v.own_labels, v.slot, v.base) for _, v in sorted(vc.vnodes.items())
    ]
    return VClusterRecord(
        vc.vc_id,
        vc.spec,
        vc.parent,
        vc.priority,
        vc.arrival,
        vc.status,
        vc.reason,
        vc.overtaken,
        vc.destroying,
        vnodes,
        list(vc.children),
        dump(vc.scope),
    )


def restore(snapshot: ViewSnapshot) -> ClusterView:
    """The view a snapshot was dumped from, indexes rebuilt."""
    view = _restore_scope(snapshot, VTree(), "")
    tree = view.tree
    tree.arrivals = snapshot.vcluster_arrivals
    for saved in snapshot.vclusters:
        vc = VClusterState(
            saved.vc_id,
            saved.spec,
            saved.parent,
            saved.priority,
            saved.arrival,
            _restore_scope(saved.scope, tree, saved.vc_id),
        )
        vc.status, vc.reason, vc.overtaken, vc.destroying = (
            cast(AdmissionStatus, saved.status),
            saved.reason,
            saved.overtaken,
            saved.destroying,
        )
        vc.children = list(saved.children)
        vc.vnodes = {
            v.vnode_id: VNode(v.vnode_id, v.parent_node, dict(v.own_labels), v.slot, dict(v.base)) for v in saved.vnodes
        }
        tree.clusters[vc.vc_id] = vc
        tree.note_admission(vc)
        tree.note_damage(vc)
        for work_id in vc.live_work():
            tree.work_scope[work_id] = vc.vc_id
    for vc in _by_arrival(view):
        for vnode in vc.vnodes.values():
            parent_scope(view, vc).carved.setdefault(vnode.parent_node, {})[vnode.vnode_id] = vc.vc_id
    _restore_launches(view, snapshot)
    return view


def _restore_launches(view: ClusterView, snapshot: ViewSnapshot) -> None:
    view.launch_count, view.autoscaler_epoch = snapshot.launch_count, snapshot.autoscaler_epoch
    view.node_type_labels = {name: dict(labels) for name, labels in snapshot.node_type_labels.items()}
    for saved in snapshot.launches:
        launch = Launch(saved.launch_id, saved.node_type, saved.requested_at, saved.reason, tuple(saved.work))
        launch.state, launch.node_id = cast(LaunchState, saved.state), saved.node_id
        launch.note, launch.changed_at, launch.idle_since = saved.note, saved.changed_at, saved.idle_since
        launch.nominated = {work_id: dict(amount) for work_id, amount in saved.nominated.items()}
        launch.existing = {
            node_id: {work_id: dict(amount) for work_id, amount in put.items()}
            for node_id, put in saved.existing.items()
        }
        view.launches[launch.launch_id] = launch
        if launch.state in ENDED_LAUNCH_STATES:
            view.ended_launches[launch.launch_id] = None
        elif launch.node_id:
            view.launched_nodes[launch.node_id] = launch.launch_id
    rebuild(view)


def _restore_scope(snapshot: ViewSnapshot, tree: VTree, scope_id: str) -> ClusterView:
    view = ClusterView(snapshot.seed, tree=tree, scope_id=scope_id)
    view.version, view.epoch, view.arrivals = snapshot.version, snapshot.epoch, snapshot.arrivals
    for saved in snapshot.nodes:
        node = NodeState(saved.node_id, stable_hash(view.seed, saved.node_id), saved.total, saved.labels)
        node.address, node.removed_at = saved.address, saved.removed_at
        node.set_free(dict(saved.free))
        if saved.layers is not None:
            kept = saved.layers
            node.layers = Layers(kept.agent_labels, kept.agent_taints, kept.operator_labels, kept.operator_taints)
        node.footprint = node_footprint(node)
        view.set_taints(node, saved.taints)
        restore_liveness(view, node, saved.unreachable_since, saved.dead_for)
        if saved.dead:
            view.dead[node.node_id] = node
            view.prefer_tainted.discard(node.node_id)
        else:
            view.add_live_node(node)
    for group_record in snapshot.groups:
        group = GroupState(group_record.request, group_record.arrival)
        group.status, group.option = cast(WorkStatus, group_record.status), group_record.option
        group.explanation = group_record.explanation
        group.bundles = group.option_bundles(group_record.option)
        group.bundle_nodes = list(group_record.bundle_nodes)
        group.bundle_free = [dict(free) for free in group_record.bundle_free]
        for index, node_id in enumerate(group.bundle_nodes):
            host = view.node(node_id) if node_id is not None else None
            if host is not None:
                host.bundles.add((group.request.pg_id, index))
        view.groups[group.request.pg_id] = group
    for actor_record in snapshot.actors:
        actor = ActorState(actor_record.request, actor_record.arrival)
        actor.status = cast(WorkStatus, actor_record.status)
        actor.node_id, actor.restarts = actor_record.node_id, actor_record.restarts
        actor.bundle, actor.explanation = actor_record.bundle, actor_record.explanation
        actor_id = actor.request.actor_id
        view.actors[actor_id] = actor
        host = view.node(actor.node_id) if actor.node_id is not None else None
        if host is not None:
            host.actors.add(actor_id)
            view.index_actor(actor.request, host, 1)
        if actor.bundle is not None and actor.bundle[0] in view.groups:
            view.groups[actor.bundle[0]].actors.add(actor_id)
    view.footprints = {actor_id: dict(footprint) for actor_id, footprint in snapshot.records.items()}
    view.ended = OrderedDict.fromkeys(snapshot.ended)
    view.pending = dict.fromkeys(snapshot.pending)
    return view


def encode(snapshot: ViewSnapshot) -> bytes:
    """The snapshot as msgpack bytes."""
    return _CANONICAL.encode(snapshot)


def decode(blob: bytes) -> ViewSnapshot:
    """A snapshot from msgpack bytes (`msgspec.ValidationError` / `DecodeError` when it is not one)."""
    return msgspec.msgpack.decode(blob, type=ViewSnapshot)


def digest(view: ClusterView) -> str:
    """A canonical hash of the view's content: equal views give equal digests, whatever their history."""
    content = decode(encode(msgspec.structs.replace(dump(view), version=0)))  # typed decode: 1 and 1.0 agree
    return hashlib.blake2b(encode(content), digest_size=16).hexdigest()
