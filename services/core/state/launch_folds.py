"""Folding the autoscaler's events (elected, launches, failures, drains, terminations) into a root view (pure).

A node that registers with the system label `corral.io/launch-id` of a known launch becomes that launch's node;
its death ends the launch. Whether a launched node holds work, and since when it has held none, is noted as work
folds onto it and off it (`note_work`), at the log time of the event folded.
"""

from __future__ import annotations

from typing import Final

from schemas import (
    AutoscalerElected,
    LaunchesNominated,
    NodeDrainCancelled,
    NodeDrainStarted,
    NodeLaunchFailed,
    NodesLaunchRequested,
    NodeTerminationRequested,
)
from services.core.labels import LAUNCH_ID
from services.core.state.folds import fold_of
from services.core.state.model import ENDED_LAUNCH_STATES, Launch, LaunchState
from services.core.state.nominations import end_launch, end_node, hold, nominate, nominate_existing
from services.core.state.view import ClusterView

LAUNCHES_KEPT: Final = 1_000
"""Ended launches (failed, terminated, gone) a view keeps, the newest; live ones are always kept."""


@fold_of(AutoscalerElected)
def on_autoscaler_elected(view: ClusterView, event: AutoscalerElected) -> None:
    """An autoscaler instance leads from here, with its node types' labels."""
    if event.epoch >= view.autoscaler_epoch:
        view.node_type_labels = {name: dict(labels) for name, labels in sorted(event.node_type_labels.items())}
    view.autoscaler_epoch = max(view.autoscaler_epoch, event.epoch)


@fold_of(NodesLaunchRequested)
def on_nodes_launch_requested(view: ClusterView, event: NodesLaunchRequested) -> None:
    """New launches (an id already known is left as it is), with the work their nodes are nominated for."""
    new = []
    for launch_id in event.launch_ids:
        if launch_id not in view.launches:
            launch = Launch(launch_id, event.node_type, event.requested_at, event.reason, tuple(event.work))
            view.launches[launch_id] = launch
            view.launch_count += 1
            new.append(launch)
    if event.nominated:
        nominate(view, new, event.nominated)


@fold_of(LaunchesNominated)
def on_launches_nominated(view: ClusterView, event: LaunchesNominated) -> None:
    """More work for launches already asked for (counted on them by a later round, or too much for one
    `NodesLaunchRequested`); a launch ended meanwhile is skipped, one registered meanwhile holds the room at once."""
    live = [view.launches[launch_id] for launch_id in sorted(event.nominated)]
    nominate(view, [launch for launch in live if launch.state not in ENDED_LAUNCH_STATES], event.nominated)
    for launch_id, existing in sorted(event.existing.items()):
        launch = view.launches[launch_id]
        if launch.state not in ENDED_LAUNCH_STATES:
            nominate_existing(view, launch, existing)


@fold_of(NodeLaunchFailed)
def on_node_launch_failed(view: ClusterView, event: NodeLaunchFailed) -> None:
    """A launch that never registered is over (a launch whose node registered meanwhile stays)."""
    launch = view.launches.get(event.launch_id)
    if launch is not None and launch.state == "launching":
        _move(view, launch, "failed", event.reason, event.failed_at)


@fold_of(NodeDrainStarted)
def on_node_drain_started(view: ClusterView, event: NodeDrainStarted) -> None:
    """A launched node is being drained for scale-down."""
    launch = view.launches.get(event.launch_id)
    if launch is not None and launch.state == "registered" and launch.node_id == event.node_id:
        _move(view, launch, "draining", event.reason, event.at)


@fold_of(NodeDrainCancelled)
def on_node_drain_cancelled(view: ClusterView, event: NodeDrainCancelled) -> None:
    """A draining node stays."""
    launch = view.launches.get(event.launch_id)
    if launch is not None and launch.state == "draining" and launch.node_id == event.node_id:
        _move(view, launch, "registered", event.reason, event.at)


@fold_of(NodeTerminationRequested)
def on_node_termination_requested(view: ClusterView, event: NodeTerminationRequested) -> None:
    """A launched node is terminated and removed."""
    launch = view.launches.get(event.launch_id)
    if launch is not None and launch.state not in ENDED_LAUNCH_STATES and launch.node_id == event.node_id:
        _move(view, launch, "terminated", event.reason, event.requested_at)


def note_registered(view: ClusterView, node_id: str, labels: dict[str, str]) -> None:
    """A node registered: the launch its `corral.io/launch-id` names (one still launching, or failed in the
    meantime: a late node is still the autoscaler's) now has it."""
    launch = view.launches.get(labels.get(LAUNCH_ID, ""))
    if launch is not None and launch.state in ("launching", "failed") and not launch.node_id:
        if launch.state == "failed":
            view.ended_launches.pop(launch.launch_id, None)
        launch.state, launch.node_id = "registered", node_id
        launch.idle_since = view.log_time
        view.launched_nodes[node_id] = launch.launch_id
        hold(view, launch)


def note_work(view: ClusterView, node_id: str) -> None:
    """Actors, bundles or virtual nodes went onto or off a node: a launched node holding none is idle from the
    time of the event folded (unless it was already), one holding some is not idle."""
    launch_id = view.launched_nodes.get(node_id)
    node = view.nodes.get(node_id)
    if launch_id is None or node is None:
        return
    launch = view.launches[launch_id]
    if node.actors or node.bundles or view.carved.get(node_id):
        launch.idle_since = None
    elif launch.idle_since is None:
        launch.idle_since = view.log_time


def note_died(view: ClusterView, node_id: str) -> None:
    """A node died: the launch it belonged to is over (unless it was terminated already), and the room launches
    held on it is held no more."""
    end_node(view, node_id)
    launch_id = view.launched_nodes.get(node_id)
    launch = view.launches.get(launch_id) if launch_id is not None else None
    if launch is not None and launch.state not in ENDED_LAUNCH_STATES:
        _move(view, launch, "gone", "the node died", launch.changed_at)


def _move(view: ClusterView, launch: Launch, state: LaunchState, note: str, at: float) -> None:
    launch.state, launch.note, launch.changed_at = state, note, at
    if state in ENDED_LAUNCH_STATES:
        end_launch(view, launch)
        view.launched_nodes.pop(launch.node_id, None)
        view.ended_launches[launch.launch_id] = None
        while len(view.ended_launches) > LAUNCHES_KEPT:
            oldest = next(iter(view.ended_launches))
            del view.ended_launches[oldest]
            view.launches.pop(oldest, None)
