"""Virtual clusters under /api/v1/vclusters: create, list as a tree, show, destroy."""

from __future__ import annotations

import msgspec
from litestar import Router, delete, get, post

from schemas import Admitted, Destroyed, Queued, VirtualCluster, VirtualClusterInfo
from services.client import Client
from services.gateway.errors import CHANGES, CHANGES_WITH_BODY


class NewVirtualCluster(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A virtual cluster to create: its id, spec, parent (none: under the root) and admission priority."""

    vc_id: str
    spec: VirtualCluster = msgspec.field(default_factory=VirtualCluster)
    parent: str | None = None
    priority: int = 0


class TreeEntry(msgspec.Struct, frozen=True):
    """One cluster of the tree, depth first: `depth` 0 is a root."""

    depth: int
    cluster: VirtualClusterInfo


@post("/", status_code=200, guards=CHANGES_WITH_BODY)
async def create(client: Client, data: NewVirtualCluster) -> Admitted | Queued:
    """Ask for a virtual cluster and wait until it is admitted (its virtual nodes) or queued (its position)."""
    return await client.create_virtual_cluster(data.vc_id, data.spec, data.parent, data.priority)


async def tree_of(client: Client) -> list[TreeEntry]:
    """Every virtual cluster, depth first from the roots."""
    clusters = {info.cluster_id: info for info in await client.virtual_clusters()}
    entries: list[TreeEntry] = []

    def walk(cluster_id: str, depth: int) -> None:
        info = clusters.get(cluster_id)
        if info is not None:
            entries.append(TreeEntry(depth, info))
            for child in info.children:
                walk(child, depth + 1)

    for info in clusters.values():
        if info.parent is None or info.parent not in clusters:
            walk(info.cluster_id, 0)
    return entries


@get("/")
async def tree(client: Client) -> list[TreeEntry]:
    """Every virtual cluster, depth first from the roots (used, total and max resources in each)."""
    return await tree_of(client)


@get("/{vc_id:str}")
async def show(client: Client, vc_id: str) -> VirtualClusterInfo:
    """One virtual cluster: spec, state, resources, virtual nodes, children."""
    return await client.virtual_cluster(vc_id)


@delete("/{vc_id:str}", status_code=200, guards=CHANGES)
async def destroy(client: Client, vc_id: str, force: bool = False) -> Destroyed:
    """Destroy a cluster and its children (`?force=true` stops their live work; without it live work refuses)."""
    return await client.destroy_virtual_cluster(vc_id, force=force)


vclusters_router = Router("/api/v1/vclusters", route_handlers=[create, tree, show, destroy], tags=["virtual clusters"])
"""The virtual-cluster calls."""
