"""The demo through the bus: an embedded mesh, the workload sent by the client, the state read from the log."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from schemas import AnyEvent, PlacementGroupRequest, ScheduleRequest, Taint, VirtualCluster
from services.cli.commands.history import render_trace
from services.cli.demo import autoscaling, inprocess
from services.cli.demo.workload import RARE_RESOURCES, SEED, add_nodes
from services.cli.history import history_lines
from services.client import SyncClient
from services.core import Cluster
from services.local.mesh import start_mesh
from services.runtime.bus import Bus
from services.runtime.settings import Settings


class ThroughTheBus:
    """The demo's calls as client requests; `cluster()` replays the mesh's event log once it has been quiet a moment."""

    def __init__(self, client: SyncClient, nats_url: str) -> None:
        self.client, self.nats_url = client, nats_url

    def add_node(
        self,
        node_id: str,
        resources: dict[str, float],
        labels: dict[str, str] | None = None,
        taints: dict[str, str] | list[Taint] | None = None,
        *,
        address: str = "",
        **defaults: str | None,
    ) -> object:
        """Register a node (its heartbeats run while the demo does)."""
        return self.client.register_node(node_id, resources, labels, taints, address=address, **defaults)

    def submit(self, request: ScheduleRequest) -> object:
        """Publish a scheduling request and wait for the decision."""
        return self.client.submit(request)

    def create_placement_group(self, request: PlacementGroupRequest) -> object:
        """Publish a placement-group request."""
        return self.client.create_placement_group(request)

    def remove_node(self, node_id: str) -> object:
        """The labels service declares the node dead; the scheduler reacts."""
        return self.client.remove_node(node_id)

    def add_taints(self, node_id: str, taints: list[Taint]) -> object:
        """The taints service appends the taints."""
        return self.client.add_taints(node_id, taints)

    def remove_taints(self, node_id: str, keys: list[str]) -> object:
        """The taints service deletes the taints."""
        return self.client.remove_taints(node_id, keys)

    def create_virtual_cluster(
        self, vc_id: str, spec: VirtualCluster, parent: str | None = None, priority: int = 0
    ) -> object:
        """The vclusters service records the request; the scheduler admits or queues it."""
        return self.client.create_virtual_cluster(vc_id, spec, parent=parent, priority=priority)

    def destroy_virtual_cluster(self, vc_id: str, force: bool = False) -> object:
        """The vclusters service records the request; the scheduler stops the work and releases the nodes."""
        return self.client.destroy_virtual_cluster(vc_id, force=force)

    def cluster(self) -> Cluster:
        """The log, once it stops growing, folded into a view (replay never re-decides)."""
        events = asyncio.run(_quiet_log(self.nats_url))
        return Cluster.from_events(events, SEED, RARE_RESOURCES)


async def _quiet_log(nats_url: str, quiet: float = 0.3) -> list[AnyEvent]:
    bus = await Bus.connect(Settings(nats_url=nats_url), "corral-demo-reader")
    try:
        last, since = await bus.last_sequence(), time.monotonic()
        while time.monotonic() - since < quiet:
            await asyncio.sleep(0.05)
            now = await bus.last_sequence()
            if now != last:
                last, since = now, time.monotonic()
        return await bus.read_to(last)
    finally:
        await bus.close()


HISTORY_OF = ("cache", "web-2")
"""Actors whose history the demo prints: one restarted after its node died, one evicted by a NoExecute taint."""


def show_history(client: SyncClient) -> None:
    """What the log says happened to a few actors, and how the last one's latest placement was decided."""
    print("\nHISTORY (from the event log: `corral events --actor ID`, the end of `corral describe actor ID`)")
    for actor_id in HISTORY_OF:
        print(f"{actor_id}:")
        print("\n".join(f"  {line}" for line in history_lines(client.history(actor_id=actor_id))))
    print(f"\nHOW {HISTORY_OF[-1]} WAS PLACED (`corral why-placed {HISTORY_OF[-1]}`)")
    print(render_trace(client.why_placed(HISTORY_OF[-1])))


def run() -> int:
    """Start the mesh, run the demo through it, stop everything; then the autoscaler's act on a mesh of its own;
    0 when done."""
    with tempfile.TemporaryDirectory(prefix="corral-demo-") as data:
        print(
            "starting the embedded mesh: nats-server, redis-server, labels, taints, vclusters, scheduler ...",
            file=sys.stderr,
        )
        settings = {"CORRAL_RARE_RESOURCES": ",".join(RARE_RESOURCES), "CORRAL_SEED": str(SEED)}
        mesh = start_mesh(Path(data), settings=settings)
        os.environ.update(settings, CORRAL_REDIS_URL=mesh.env["CORRAL_REDIS_URL"])  # for why-placed: the
        # client re-runs a past decision as the scheduler made it, from the scheduler's snapshot
        try:
            with SyncClient(mesh.nats_url, timeout=10.0) as client:
                client.wait_ready()
                driver = ThroughTheBus(client, mesh.nats_url)
                add_nodes(driver)
                status = inprocess.run(driver, where=f"through the bus at {mesh.nats_url}")
                show_history(client)
        finally:
            mesh.stop()
        print("mesh stopped cleanly", file=sys.stderr)
    return status or autoscaling.run()


if __name__ == "__main__":
    sys.exit(run())
