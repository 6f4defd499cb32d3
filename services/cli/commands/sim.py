"""`corral sim`: register many simulated nodes from one process and keep them alive with heartbeats."""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass

from services.cli import args as types
from services.cli.common import (
    CliError,
    UsageError,
    add_connection_arguments,
    connected,
    progress,
    say,
    stop_signals,
    stop_tasks,
)
from services.cli.registry import Subcommands
from services.client import Client, CorralError, UnavailableError

ACCELERATORS = ("A100", "H100", "L4")
"""Accelerator types handed out to the GPU nodes in turn."""

SERVICE_WAIT_S = 60.0
"""How long `corral sim` asks again while the labels service does not answer (it may start after the simulator)."""
SERVICE_RETRY_S = 0.5
"""How long it waits between two asks."""
IN_FLIGHT = 64
"""Registrations awaiting their reply at once."""


@dataclass(frozen=True)
class SimNode:
    """One simulated node: id, resources, zone, user labels and accelerator type (GPU nodes only)."""

    node_id: str
    resources: dict[str, float]
    zone: str
    labels: dict[str, str]
    accelerator_type: str | None = None


def sim_nodes(count: int, *, cpu: float, gpu_every: int, gpus: float, zones: int, prefix: str) -> list[SimNode]:
    """The nodes `corral sim` registers: zones z0.. in turn; every `gpu_every`-th node has GPUs (0: none)."""
    width = max(3, len(str(count - 1)))
    nodes = []
    for index in range(count):
        has_gpu = gpu_every > 0 and index % gpu_every == gpu_every - 1
        resources = {"CPU": cpu, "GPU": gpus} if has_gpu else {"CPU": cpu}
        accelerator = ACCELERATORS[(index // gpu_every) % len(ACCELERATORS)] if has_gpu else None
        nodes.append(
            SimNode(
                f"{prefix}{index:0{width}d}",
                resources,
                f"z{index % zones}",
                {"sim": "true", "node-kind": "gpu" if has_gpu else "cpu"},
                accelerator,
            )
        )
    return nodes


def add_parsers(commands: Subcommands) -> None:
    """Register `sim`."""
    sim = commands.add_parser(
        "sim",
        help="register N simulated nodes and heartbeat them until Ctrl-C",
        description="Register N simulated nodes from this process (zones z0, z1, ... in turn; every --gpu-every-th "
        f"node gets --gpus GPUs and an accelerator type among {', '.join(ACCELERATORS)}), show progress on stderr, "
        "then keep them alive with heartbeats until SIGINT or SIGTERM. While the labels service does not answer yet "
        f"(it may start after the simulator), registrations are asked again for up to {SERVICE_WAIT_S:g} s. The nodes "
        "are not removed on exit: the labels service declares them dead after the heartbeat timeout.",
    )
    sim.add_argument("--nodes", type=types.positive_int, required=True, metavar="N", help="how many nodes")
    sim.add_argument("--cpu", type=types.amount, default=8.0, metavar="N", help="CPUs per node (default: %(default)g)")
    sim.add_argument(
        "--gpu-every",
        type=types.non_negative_int,
        default=10,
        metavar="K",
        help="every K-th node has GPUs; 0 for none (default: %(default)s)",
    )
    sim.add_argument(
        "--gpus", type=types.amount, default=4.0, metavar="N", help="GPUs per GPU node (default: %(default)g)"
    )
    sim.add_argument("--zones", type=types.positive_int, default=3, metavar="K", help="zones z0..z(K-1) (default: 3)")
    sim.add_argument("--prefix", default="sim-", help="node id prefix (default: %(default)s)")
    add_connection_arguments(sim, service="labels service")
    sim.set_defaults(run=run_sim, parser=sim)


async def register_all(client: Client, nodes: list[SimNode]) -> None:
    """Register every node, `IN_FLIGHT` at a time, with a progress counter on stderr; the first refusal stops it."""
    limit = asyncio.Semaphore(IN_FLIGHT)
    deadline = asyncio.get_running_loop().time() + SERVICE_WAIT_S
    errors: list[str] = []
    done = 0
    step = max(1, len(nodes) // 100)

    async def one(node: SimNode) -> None:
        nonlocal done
        async with limit:
            if errors:
                return
            try:
                await _register(client, node, deadline)
            except CorralError as error:
                errors.append(f"{node.node_id}: {error}")
                return
            done += 1
            if done % step == 0 or done == len(nodes):
                progress(f"\rregistering nodes: {done}/{len(nodes)}")

    await asyncio.gather(*(one(node) for node in nodes))
    progress("\n")
    if errors:
        raise CliError(f"{len(errors)} node(s) not registered ({done} were); the first: {errors[0]}")


async def _register(client: Client, node: SimNode, deadline: float) -> None:
    """Register `node`, asked again while the labels service does not answer yet, until `deadline` (loop time): a
    deployment starts the simulator beside the services, and it may come up first."""
    while True:
        try:
            await client.register_node(
                node.node_id, node.resources, node.labels, zone=node.zone, accelerator_type=node.accelerator_type
            )
            return
        except UnavailableError:
            if asyncio.get_running_loop().time() >= deadline:
                raise
            await asyncio.sleep(SERVICE_RETRY_S)


def run_sim(args: argparse.Namespace) -> int:
    """`corral sim`."""
    if args.cpu <= 0 or args.gpus <= 0:
        raise UsageError(f"--cpu {args.cpu:g} and --gpus {args.gpus:g}: both must be above 0")
    nodes = sim_nodes(
        args.nodes, cpu=args.cpu, gpu_every=args.gpu_every, gpus=args.gpus, zones=args.zones, prefix=args.prefix
    )

    async def main() -> None:
        with stop_signals() as stop:
            async with connected(args, name="corral-sim", quiet=False) as client:
                registering = asyncio.create_task(register_all(client, nodes))
                stopping = asyncio.create_task(stop.wait())
                try:
                    done, _ = await asyncio.wait({registering, stopping}, return_when=asyncio.FIRST_COMPLETED)
                    if registering not in done:
                        await stop_tasks(registering)
                        print("\nstopped while registering", file=sys.stderr)
                        return
                    registering.result()
                    gpu_nodes = sum(1 for node in nodes if node.accelerator_type)
                    zones = min(args.zones, len(nodes))
                    say(
                        f"{len(nodes)} simulated nodes registered ({gpu_nodes} with GPUs) in {zones} zone(s); "
                        "heartbeating until Ctrl-C"
                    )
                    await stopping
                finally:
                    stopping.cancel()
        print("simulated nodes stopped: heartbeats end", file=sys.stderr)

    asyncio.run(main())
    return 0
