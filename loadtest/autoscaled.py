"""The autoscaler phase's pieces: the node types it may launch, users' work only those types can host, and the
figures and checks read back from the event log.

The phase runs on a mesh of its own with the autoscaler (`local` provider: launched nodes are node agents in the
autoscaler's process, so the types' `max_workers` stay small on a small machine). A few plain nodes exist; every
request selects `pool=loadtest-autoscaled`, which only the launched types carry, and a quarter of them need a GPU
share and tolerate the GPU type's taint, so the cluster has to grow for both types.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

from loadtest.autoscaler_latency import event_times
from loadtest.stats import percentile
from loadtest.transport import CorralTarget
from loadtest.workloads import Ticket, Workload
from schemas import (
    ActorPlaced,
    ActorRemoved,
    AnyEvent,
    NodeLaunchFailed,
    NodeRegistered,
    NodesLaunchRequested,
    NodeTerminationRequested,
    ScheduleRequest,
)
from services.client import Client
from services.core.labels import LAUNCH_ID, NODE_TYPE
from services.local.mesh import AUTOSCALER, SERVICES, Mesh, start_mesh

POOL = {"pool": "loadtest-autoscaled"}
"""The label only the autoscaled node types carry: every request of the phase selects it."""
GPU_TAINT_KEY = "loadtest-gpu"
CPU_TYPE = "lt-cpu"
GPU_TYPE = "lt-gpu"
MAX_WORKERS = {CPU_TYPE: 4, GPU_TYPE: 3}
"""Room for what the users can hold at once (16 one-CPU actors; GPU actors four to a node), with a GPU node to
spare for an unlucky draw."""
IDLE_TIMEOUT_S = 3.0
INTERVAL_S = 0.5
"""`CORRAL_AUTOSCALER_INTERVAL`: rounds also run at once when demand changes; this paces scale-down."""
USERS = 4
HOLD = 3
"""Each user holds at most this many actors (plus the one it is sending), removing its oldest first."""
EXISTING_NODES = 2
"""Plain nodes registered before the users start; none carries the pool label."""
SETTLE_S = 15.0
"""How long the users' last actors may wait for their nodes after the users stop."""
SCALE_DOWN_GRACE_S = 15.0
"""How long after the idle timeout the launched nodes may take to be gone."""

NODE_TYPES = f"""
provider: {{type: local}}
idle_timeout_s: {IDLE_TIMEOUT_S}
upscaling_speed: 1.0
launch_timeout_s: 20
node_types:
  {CPU_TYPE}:
    resources: {{CPU: 4}}
    labels: {{pool: {POOL["pool"]}}}
    max_workers: {MAX_WORKERS[CPU_TYPE]}
  {GPU_TYPE}:
    resources: {{CPU: 4, GPU: 1}}
    labels: {{pool: {POOL["pool"]}}}
    taints: {{{GPU_TAINT_KEY}: "true"}}
    max_workers: {MAX_WORKERS[GPU_TYPE]}
    cost: 10
"""


def _cpu(ticket: Ticket) -> ScheduleRequest:
    return ScheduleRequest(ticket.actor_id, {"CPU": 1.0}, label_selector=dict(POOL))


def _gpu(ticket: Ticket) -> ScheduleRequest:
    return ScheduleRequest(
        ticket.actor_id, {"CPU": 1.0, "GPU": 0.25}, label_selector=dict(POOL), tolerations={GPU_TAINT_KEY: "true"}
    )


WORKLOADS: tuple[Workload, ...] = (
    Workload("autoscaled_cpu", 3, f"1 CPU, selector {POOL}", _cpu),
    Workload("autoscaled_gpu", 1, f"1 CPU and 0.25 GPU, selector {POOL}, tolerates {GPU_TAINT_KEY}", _gpu),
)


class AutoscaledTarget(CorralTarget):
    """The Corral scheduler, on the phase's mesh where the autoscaler launches the nodes the work needs."""

    name = "autoscaler"
    description = "the Corral scheduler with the autoscaler: work only launched nodes can host"


def start_autoscaled_mesh(folder: Path) -> Mesh:
    """The four services and the autoscaler with the phase's node types, in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "autoscaler.yaml"
    config.write_text(NODE_TYPES, encoding="utf-8")
    settings = {"CORRAL_AUTOSCALER_CONFIG": str(config), "CORRAL_AUTOSCALER_INTERVAL": str(INTERVAL_S)}
    return start_mesh(folder / "mesh", services=(*SERVICES, AUTOSCALER), settings=settings)


async def wait_settled(client: Client, timeout: float) -> None:
    """Wait (up to `timeout` seconds) until no work is pending; the figures say what was left."""
    deadline = time.monotonic() + timeout
    while await client.pending(limit=1) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)


async def wait_scaled_down(client: Client, timeout: float) -> tuple[float | None, int, int]:
    """Wait until no launched node is left: (seconds it took or None after `timeout`, nodes, launched nodes)."""
    began = time.monotonic()
    while True:
        nodes = await client.nodes()
        launched = sum(1 for node in nodes if NODE_TYPE in node.labels)
        waited = time.monotonic() - began
        if launched == 0 or waited > timeout:
            return (round(waited, 2) if launched == 0 else None), len(nodes), launched
        await asyncio.sleep(0.1)


class Delays(TypedDict):
    """Per-actor delays read from the log, in milliseconds."""

    actors: int
    p50: float
    p99: float


class AutoscalerFigures(TypedDict):
    """What the autoscaler phase measured and checked."""

    max_workers: dict[str, int]
    existing_nodes: int
    actors: int
    """Actors the users sent (each seen in the log)."""
    growth_s: float
    """From the first pending actor to the registration of the last node launched while the users ran."""
    placements_per_s: float
    """Placements within the growth, over its seconds."""
    pending_to_launch_ms: Delays
    """From an actor's first `ActorPending` to the first `NodesLaunchRequested` naming it (nats-server's clock)."""
    pending_to_placed_ms: Delays
    """From an actor's first `ActorPending` to its `ActorPlaced`."""
    launched: int
    registered: int
    with_work: int
    """Launched nodes that held work at some point."""
    launches_failed: int
    idle_with_demand: list[str]
    """Launched nodes that never held work although work their launch was for still waited when they registered."""
    peak: dict[str, int]
    """Per type, the most launches under way or running at once."""
    still_pending: int
    """Actors neither placed nor removed once the users stopped and their work had time to settle."""
    scale_down_s: float | None
    """From the last actor's removal until no launched node was left (None: some were still there)."""
    final_nodes: int
    final_launched: int


def _delays(values: list[float]) -> Delays:
    ordered = sorted(values)
    return Delays(
        actors=len(ordered),
        p50=round(percentile(ordered, 0.5) * 1000, 1),
        p99=round(percentile(ordered, 0.99) * 1000, 1),
    )


def autoscaler_figures(
    events: Sequence[tuple[float, AnyEvent]],
    settled_at: float,
    scale_down: tuple[float | None, int, int],
) -> AutoscalerFigures:
    """The figures from the whole log (with nats-server's times); `settled_at` is when the users had stopped and
    their work had had time to be placed, just before their last actors were removed (Unix seconds), and
    `scale_down` what `wait_scaled_down` saw after that removal."""
    timeline = event_times(events)
    launch_type: dict[str, str] = {}
    launch_work: dict[str, list[str]] = {}
    registered: dict[str, tuple[str, float]] = {}
    """Launch id -> (node id, registration moment)."""
    removed: dict[str, float] = {}
    nodes_with_work: set[str] = set()
    running = dict.fromkeys(MAX_WORKERS, 0)
    peak = dict.fromkeys(MAX_WORKERS, 0)
    failed = 0
    for moment, event in events:
        if isinstance(event, NodesLaunchRequested):
            for launch_id in event.launch_ids:
                launch_type[launch_id], launch_work[launch_id] = event.node_type, list(event.work)
            running[event.node_type] = running.get(event.node_type, 0) + len(event.launch_ids)
            peak[event.node_type] = max(peak.get(event.node_type, 0), running[event.node_type])
        elif isinstance(event, NodeLaunchFailed | NodeTerminationRequested) and event.launch_id in launch_type:
            failed += isinstance(event, NodeLaunchFailed)
            running[launch_type[event.launch_id]] -= 1
        elif isinstance(event, NodeRegistered) and LAUNCH_ID in event.labels:
            registered.setdefault(event.labels[LAUNCH_ID], (event.node_id, moment))
        elif isinstance(event, ActorPlaced):
            nodes_with_work.add(event.node_id)
        elif isinstance(event, ActorRemoved):
            removed.setdefault(event.actor_id, moment)

    def waiting(actor: str, moment: float) -> bool:
        return (
            timeline.pending.get(actor, moment + 1) <= moment
            and timeline.placed.get(actor, moment + 1) > moment
            and removed.get(actor, moment + 1) > moment
        )

    idle_with_demand = sorted(
        node
        for launch_id, (node, moment) in registered.items()
        if node not in nodes_with_work and any(waiting(actor, moment) for actor in launch_work.get(launch_id, []))
    )
    actors = set(timeline.pending) | set(timeline.placed)
    still_pending = sum(1 for actor in timeline.pending if waiting(actor, settled_at))
    first = min(timeline.pending.values(), default=0.0)
    grown = max((moment for _, moment in registered.values() if moment <= settled_at), default=first)
    growth_s = max(0.0, grown - first)
    during = sum(1 for moment in timeline.placed.values() if first <= moment <= grown)
    scale_down_s, final_nodes, final_launched = scale_down
    return AutoscalerFigures(
        max_workers=dict(MAX_WORKERS),
        existing_nodes=EXISTING_NODES,
        actors=len(actors),
        growth_s=round(growth_s, 3),
        placements_per_s=round(during / growth_s, 1) if growth_s > 0 else 0.0,
        pending_to_launch_ms=_delays(timeline.delays(timeline.launched)),
        pending_to_placed_ms=_delays(timeline.delays(timeline.placed)),
        launched=len(launch_type),
        registered=len(registered),
        with_work=sum(1 for node, _ in registered.values() if node in nodes_with_work),
        launches_failed=failed,
        idle_with_demand=idle_with_demand,
        peak=peak,
        still_pending=still_pending,
        scale_down_s=scale_down_s,
        final_nodes=final_nodes,
        final_launched=final_launched,
    )
