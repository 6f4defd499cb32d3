"""`corral vc create|list|show|destroy`: virtual clusters, as `kubectl` shows namespaces with quotas."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

import msgspec

from schemas import Admitted, Destroyed, Queued, VirtualCluster, VirtualClusterInfo
from services.cli.common import CliError, add_connection_arguments, connected, read_input, say
from services.cli.files import read_file
from services.cli.listing import used_total
from services.cli.output import add_output_argument, structured
from services.cli.registry import Subcommands
from services.cli.table import format_table
from services.cli.wait import wait_admitted
from services.core.amounts import format_amount
from services.core.errors import CodecError
from services.core.labels import SYSTEM_PREFIX
from services.runtime.codec import decode

NONE = "<none>"


def usage(info: VirtualClusterInfo) -> str:
    """`CPU 3/4, GPU 0/1`: used/total per resource."""
    parts = []
    for name in sorted(info.total_resources):
        total = info.total_resources[name]
        used = total - info.available_resources.get(name, 0.0)
        parts.append(f"{name} {used_total(name, total, total - used)}")
    return ", ".join(parts) or NONE


def maximum(info: VirtualClusterInfo) -> str:
    """`CPU 8, GPU unbounded`: what the cluster may reach."""
    parts = [
        f"{name} {'unbounded' if bound is None else format_amount(name, bound)}"
        for name, bound in info.max_resources.items()
    ]
    return ", ".join(parts) or "unbounded"


def tree_table(infos: Sequence[VirtualClusterInfo]) -> str:
    """Every cluster as a tree (children indented under their parent): state, priority, used/total, max, nodes."""
    by_id = {info.cluster_id: info for info in infos}
    rows: list[list[str]] = []

    def add(info: VirtualClusterInfo, depth: int) -> None:
        name = "  " * depth + info.cluster_id
        rows.append([name, info.state, str(info.priority), usage(info), maximum(info), str(len(info.nodes))])
        for child in info.children:
            if child in by_id:
                add(by_id[child], depth + 1)

    for info in infos:
        if info.parent is None or info.parent not in by_id:
            add(info, 0)
    return format_table(["CLUSTER", "STATE", "PRIORITY", "USED/TOTAL", "MAX", "VNODES"], rows)


def render_show(info: VirtualClusterInfo) -> str:
    """`corral vc show`: like `kubectl describe`: state and why, resources, then one line per virtual node."""
    lines = [
        f"Cluster:    {info.cluster_id}",
        f"Parent:     {info.parent or '<root>'}",
        f"Children:   {', '.join(info.children) or NONE}",
        f"State:      {info.state}",
    ]
    if info.message:
        lines.append(f"Message:    {info.message}")
    lines += [
        f"Priority:   {info.priority}",
        f"Used/total: {usage(info)}",
        f"Max:        {maximum(info)}",
        f"Spec:       {msgspec.json.encode(info.spec, order='sorted').decode()}",
    ]
    if info.nodes:
        rows = []
        for node in info.nodes:
            used = ", ".join(
                f"{n} {used_total(n, t, t - node.used_resources.get(n, 0.0))}"
                for n, t in sorted(node.total_resources.items())
            )
            own = {k: v for k, v in sorted(node.node_labels.items()) if not k.startswith(SYSTEM_PREFIX)}
            labels = ",".join(f"{k}={v}" for k, v in own.items()) or NONE
            kind = "flexible" if node.flexible else "fixed"
            rows.append([node.node_id, kind, node.parent_node, used or NONE, labels])
        lines += [
            "Virtual nodes:",
            format_table(["VNODE", "KIND", "CARVED FROM", "USED/TOTAL", "LABELS"], rows, indent="  "),
        ]
    else:
        lines.append(f"Virtual nodes: {NONE}")
    return "\n".join(lines)


def render_outcome(outcome: Admitted | Queued) -> str:
    """`vc1 admitted: virtual nodes a, b` or `vc1 queued (position 2): <why>`."""
    if isinstance(outcome, Admitted):
        return f"{outcome.vc_id} admitted: virtual nodes {', '.join(outcome.vnode_ids) or NONE}"
    return f"{outcome.vc_id} queued (position {outcome.position}): {outcome.message}"


def render_destroyed(result: Destroyed) -> str:
    """What went, and the work that was stopped."""
    line = f"destroyed {', '.join(result.destroyed)}"
    return f"{line}; stopped {', '.join(result.stopped)}" if result.stopped else f"{line}; no work was running"


def read_spec(text: str) -> VirtualCluster:
    """A VirtualCluster from JSON text, or from a file with `@path` (`@-`: standard input)."""
    source = "--spec"
    if text.startswith("@"):
        source = f"--spec {text}"
        data = read_input(text[1:], source)
    else:
        data = text.encode(errors="surrogateescape")  # bytes that were not UTF-8 in argv: refused by `decode`
    try:
        spec: VirtualCluster = decode(data, VirtualCluster)
    except CodecError as error:
        raise CliError(f"{source}: not a VirtualCluster spec: {error.reason}") from None
    return spec


def add_parsers(commands: Subcommands) -> None:
    """Register `vc` and its subcommands."""
    vc = commands.add_parser(
        "vc",
        help="create, list, show and destroy virtual clusters",
        description="Virtual clusters: partitions of the cluster with fixed-size nodes and a flexible min/max.",
    )
    verbs = vc.add_subparsers(dest="verb", metavar="VERB", required=True)

    create = verbs.add_parser(
        "create",
        help="create a virtual cluster; prints its virtual nodes, or its place in the admission queue",
        description="Create a virtual cluster and wait until the scheduler admits or queues it. The spec is JSON: "
        '{"flexible_resource_min": {"CPU": 1}, "flexible_resource_max": {"CPU": 8}, "fixed_size_nodes": '
        '[{"nodes": [{"resources": {"GPU": 1}, "labels": {"bundle_index": "0"}}], "scheduling_policy": '
        '"STRICT_SPREAD"}], "tolerations": {}}. Exit 0 whether admitted or queued.',
    )
    create.add_argument("vc_id", metavar="ID", help="the cluster's id (used as a label value)")
    spec = create.add_mutually_exclusive_group(required=True)
    spec.add_argument("--spec", metavar="JSON|@FILE", help="the VirtualCluster spec as JSON, or @file (@-: stdin)")
    spec.add_argument("-f", "--filename", metavar="FILE", help="the VirtualCluster spec as JSON or YAML (-: stdin)")
    create.add_argument("--wait", action="store_true", help="wait until it is admitted (at most --timeout seconds)")
    create.add_argument("--parent", metavar="ID", help="create it inside this virtual cluster (default: the root)")
    create.add_argument("--priority", type=int, default=0, metavar="N", help="higher is admitted first (default: 0)")
    add_connection_arguments(
        create, service="vclusters", timeout_help="how long to wait to connect, for admission or queueing, and --wait"
    )
    create.set_defaults(run=run_create, parser=create)

    listing = verbs.add_parser("list", help="every virtual cluster as a tree with used/total resources")
    add_output_argument(listing, ("table", "json", "yaml"), json=True)
    add_connection_arguments(listing, service="vclusters")
    listing.set_defaults(run=run_list, parser=listing)

    show = verbs.add_parser("show", help="one virtual cluster: state, resources, virtual nodes")
    show.add_argument("vc_id", metavar="ID", help="the cluster's id")
    add_output_argument(show, ("table", "json", "yaml"), json=True)
    add_connection_arguments(show, service="vclusters")
    show.set_defaults(run=run_show, parser=show)

    destroy = verbs.add_parser(
        "destroy",
        help="destroy a virtual cluster and its children, giving their resources back",
        description="Destroy a virtual cluster and its children. Refused while they have live work (placed or "
        "pending actors, placement groups) unless --force, which stops that work and lists it.",
    )
    destroy.add_argument("vc_id", metavar="ID", help="the cluster's id")
    destroy.add_argument("--force", action="store_true", help="stop the live work inside it")
    add_connection_arguments(destroy, service="vclusters", timeout=10.0)
    destroy.set_defaults(run=run_destroy, parser=destroy)


def run_create(args: argparse.Namespace) -> int:
    """`corral vc create`."""
    spec = read_spec(args.spec) if args.spec is not None else read_file(args.filename, VirtualCluster)

    async def main() -> Admitted | Queued:
        async with connected(args) as client:
            outcome = await client.create_virtual_cluster(
                args.vc_id, spec, parent=args.parent, priority=args.priority, timeout=args.timeout
            )
            if isinstance(outcome, Queued) and args.wait:
                say(render_outcome(outcome))
                return Admitted(args.vc_id, await wait_admitted(client, args.vc_id, args.timeout))
            return outcome

    say(render_outcome(asyncio.run(main())))
    return 0


def run_list(args: argparse.Namespace) -> int:
    """`corral vc list`."""

    async def main() -> list[VirtualClusterInfo]:
        async with connected(args) as client:
            return await client.virtual_clusters()

    infos = asyncio.run(main())
    if args.output != "table":
        say(structured(infos, args.output))
    else:
        say(tree_table(infos) if infos else "no virtual clusters")
    return 0


def run_show(args: argparse.Namespace) -> int:
    """`corral vc show ID`."""

    async def main() -> VirtualClusterInfo:
        async with connected(args) as client:
            return await client.virtual_cluster(args.vc_id)

    info = asyncio.run(main())
    say(render_show(info) if args.output == "table" else structured(info, args.output))
    return 0


def run_destroy(args: argparse.Namespace) -> int:
    """`corral vc destroy ID [--force]`."""

    async def main() -> Destroyed:
        async with connected(args) as client:
            return await client.destroy_virtual_cluster(args.vc_id, force=args.force, timeout=args.timeout)

    say(render_destroyed(asyncio.run(main())))
    return 0
