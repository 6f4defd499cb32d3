"""The demo's second act: two tenants side by side in virtual clusters, a nested one, and a queued one admitted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import msgspec

from schemas import FixedSizeNode, FixedSizeNodes, ScheduleRequest, VirtualCluster
from services.cli.commands.vc import tree_table
from services.cli.table import format_table
from services.core import Cluster, Pending

TEAM_A = VirtualCluster(
    flexible_resource_min={"CPU": 2},
    flexible_resource_max={"CPU": 6},
    fixed_size_nodes=[FixedSizeNodes([FixedSizeNode({"CPU": 2}, {"role": "trainer"})] * 2, "STRICT_SPREAD")],
)
TEAM_B = VirtualCluster(flexible_resource_min={"CPU": 8}, flexible_resource_max={"CPU": 8})
TEAM_A_ETL = VirtualCluster(flexible_resource_min={"CPU": 1}, flexible_resource_max={"CPU": 2})


class TenantDriver(Protocol):
    """What the tenants act needs from where the demo runs (in-process, or the client on the bus)."""

    def create_virtual_cluster(
        self, vc_id: str, spec: VirtualCluster, parent: str | None = None, priority: int = 0
    ) -> object:
        """Create (admit or queue) a virtual cluster."""

    def destroy_virtual_cluster(self, vc_id: str, force: bool = False) -> object:
        """Destroy a virtual cluster."""

    def submit(self, request: ScheduleRequest) -> object:
        """Schedule an actor."""

    def cluster(self) -> Cluster:
        """The state to print, once everything the last call set off has been decided."""


def scoped_table(cluster: Cluster, vc_id: str) -> str:
    """What a tenant sees of its own cluster: its virtual nodes and its work only."""
    placements = cluster.placements(vc_id)
    rows = []
    for node in cluster.nodes(vc_id):
        here = sorted(actor for actor, where in placements.items() if where == node.node_id)
        used, total = node.used_resources.get("CPU", 0.0), node.total_resources.get("CPU", 0.0)
        rows.append([node.node_id, node.parent_node, f"{used:g}/{total:g}", " ".join(here) or "-"])
    return format_table(["VNODE", "CARVED FROM", "CPU", "ACTORS"], rows, indent="  ")


def _why(pending: Pending) -> str:
    return f"  {pending.id}: {pending.message}"


def run(driver: TenantDriver, announce: Callable[[str], None] = print) -> None:
    """Create two tenants, nest a cluster, queue a third tenant and admit it when the second finishes."""
    announce("\nTENANTS (virtual clusters)")
    driver.create_virtual_cluster("team-a", TEAM_A, priority=1)
    driver.create_virtual_cluster("team-b", TEAM_B)
    driver.create_virtual_cluster("team-a-etl", TEAM_A_ETL, parent="team-a")
    for index in range(2):
        trainer = ScheduleRequest(f"a-trainer-{index}", {"CPU": 2}, label_selector={"role": "trainer"})
        driver.submit(msgspec.structs.replace(trainer, vcluster_id="team-a"))
    for index in range(5):
        driver.submit(ScheduleRequest(f"a-worker-{index}", {"CPU": 1}, vcluster_id="team-a"))
    for index in range(3):
        driver.submit(ScheduleRequest(f"etl-{index}", {"CPU": 1}, vcluster_id="team-a-etl"))
    for index in range(4):
        driver.submit(ScheduleRequest(f"b-job-{index}", {"CPU": 2}, vcluster_id="team-b"))
    cluster = driver.cluster()
    free = sum(node.free.get("CPU", 0.0) for node in cluster.view.nodes.values() if not node.blocking_taints)
    team_c = VirtualCluster(flexible_resource_min={"CPU": free + 4}, flexible_resource_max={"CPU": free + 4})
    driver.create_virtual_cluster("team-c", team_c)
    cluster = driver.cluster()
    announce(tree_table(cluster.virtual_clusters()))
    for vc_id in ("team-a", "team-a-etl", "team-b"):
        announce(f"\n  what {vc_id} sees:")
        announce(scoped_table(cluster, vc_id))
    announce("\n  why work waits (its own cluster is full, not the physical one):")
    for vc_id in ("team-a", "team-a-etl", "team-b"):
        for pending in cluster.pending(vc_id):
            announce(_why(pending))
    queued = cluster.virtual_cluster("team-c")
    announce(f"\n  team-c: {queued.message}")
    announce("\n* team-b finishes: its cluster is destroyed (its jobs stop), team-c is admitted")
    driver.destroy_virtual_cluster("team-b", force=True)
    cluster = driver.cluster()
    announce(tree_table(cluster.virtual_clusters()))
