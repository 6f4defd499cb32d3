"""`corral bench gateway`: requests/s and latency of the HTTP API beside the same calls through the Python client.

It starts an embedded mesh with the gateway (on free ports, in a throwaway folder), registers `--nodes` nodes
(heartbeats on, so they stay live), then for `--seconds` each, with `--workers` concurrent callers, measures
listing the nodes (`GET /api/v1/nodes` against `client.nodes()`) and submitting a small actor
(`POST /api/v1/actors` against `client.submit()`; every actor asks for 0.01 CPU, so all keep fitting). It prints
requests/s, p50 and p99 in ms of the four and asserts nothing. The HTTP side uses httpx.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from schemas import ScheduleRequest
from services.cli.args import positive_int
from services.cli.common import CliError
from services.cli.output import add_output_argument
from services.cli.registry import Subcommands
from services.client import Client
from services.local.mesh import GATEWAY, SERVICES, Mesh, start_mesh
from services.local.servers import free_port

if TYPE_CHECKING:
    import httpx

ACTOR = {"CPU": 0.01}
"""What each submitted actor asks for: small enough that every one of a run keeps fitting."""
NODE = {"CPU": 16.0, "memory": 64.0}
READY_TIMEOUT = 60.0

Call = Callable[[int], Awaitable[object]]


@dataclass(frozen=True)
class Row:
    """One operation through one path: how many calls per second, and their latency."""

    operation: str
    via: str
    requests: int
    requests_per_s: float
    p50_ms: float
    p99_ms: float


async def measure(operation: str, via: str, call: Call, seconds: float, workers: int) -> Row:
    """Call `call(n)` (n counts up across workers) from `workers` loops until `seconds` have passed."""
    latencies: list[float] = []
    counter = iter(range(1 << 62))
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await call(next(counter))
            latencies.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    elapsed = time.perf_counter() - started
    cuts = statistics.quantiles(latencies, n=100, method="inclusive") if len(latencies) > 1 else latencies * 99
    return Row(
        operation, via, len(latencies), round(len(latencies) / elapsed, 1), round(cuts[49], 2), round(cuts[98], 2)
    )


async def wait_for_gateway(http: httpx.AsyncClient, mesh: Mesh) -> None:
    """Poll `/readyz` until the gateway answers 200 (every service behind it answers)."""
    import httpx  # noqa: PLC0415 - only this benchmark needs an HTTP client: `corral` starts without it

    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        try:
            if (await http.get("/readyz")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise CliError(f"the gateway was not ready within {READY_TIMEOUT:g}s; see the logs in {mesh.data_dir}")
        await asyncio.sleep(0.1)


async def register(client: Client, count: int) -> None:
    """Register `count` nodes (heartbeats on) and wait until the labels service lists them all."""
    gate = asyncio.Semaphore(100)

    async def one(index: int) -> None:
        async with gate:
            await client.register_node(f"bench-n{index:05d}", NODE, {"tier": ("web", "batch")[index % 2]})

    await asyncio.gather(*(one(index) for index in range(count)))
    deadline = time.monotonic() + READY_TIMEOUT
    while len(await client.nodes()) < count:
        if time.monotonic() > deadline:
            raise CliError(f"fewer than {count} nodes listed {READY_TIMEOUT:g}s after registering them")
        await asyncio.sleep(0.1)


async def bench(mesh: Mesh, port: int, token: str, args: argparse.Namespace) -> list[Row]:
    """Register the nodes, then measure the four operations one after another."""
    import httpx  # noqa: PLC0415 - only this benchmark needs an HTTP client: `corral` starts without it

    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    limits = httpx.Limits(max_connections=args.workers)
    async with (
        Client(mesh.nats_url, name="corral-bench-nodes", timeout=10.0) as nodes_client,
        Client(mesh.nats_url, name="corral-bench", timeout=10.0) as client,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, limits=limits, timeout=10.0) as http,
    ):
        await nodes_client.wait_ready(READY_TIMEOUT)
        await wait_for_gateway(http, mesh)
        await register(nodes_client, args.nodes)

        async def http_nodes(_n: int) -> None:
            (await http.get("/api/v1/nodes")).raise_for_status()

        async def client_nodes(_n: int) -> None:
            await client.nodes()

        async def http_submit(n: int) -> None:
            body = msgspec.json.encode(ScheduleRequest(f"bench-http-{n}", ACTOR))
            (await http.post("/api/v1/actors", content=body)).raise_for_status()

        async def client_submit(n: int) -> None:
            await client.submit(ScheduleRequest(f"bench-client-{n}", ACTOR))

        calls: list[tuple[str, str, Call]] = [
            ("list nodes", "http", http_nodes),
            ("list nodes", "client", client_nodes),
            ("submit", "http", http_submit),
            ("submit", "client", client_submit),
        ]
        return [await measure(op, via, call, args.seconds, args.workers) for op, via, call in calls]


def print_table(rows: list[Row], args: argparse.Namespace) -> None:
    """The four figures, HTTP and client beside each other per operation."""
    print(f"corral bench gateway: {args.nodes:,} nodes, {args.workers} workers, {args.seconds:g} s per measurement")
    columns = f"{'p50 ms':>7} {'p99 ms':>7}"
    print(f"  {'operation':<34} {'HTTP req/s':>10} {columns}   {'client req/s':>12} {columns}")
    paths = {"list nodes": "GET /api/v1/nodes", "submit": "POST /api/v1/actors"}
    for operation, path in paths.items():
        http, client = (
            next(r for r in rows if r.operation == operation and r.via == via) for via in ("http", "client")
        )
        print(
            f"  {f'{operation} ({path})':<34} {http.requests_per_s:>10,.1f} {http.p50_ms:>7.2f} {http.p99_ms:>7.2f}"
            f"   {client.requests_per_s:>12,.1f} {client.p50_ms:>7.2f} {client.p99_ms:>7.2f}"
        )


def run(args: argparse.Namespace) -> int:
    """Start the mesh with the gateway, measure, print, stop it all."""
    port = free_port()
    token = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="corral-bench-gateway-") as folder:
        settings = {"CORRAL_HTTP_PORT": str(port), "CORRAL_HTTP_TOKEN": token}
        mesh = start_mesh(Path(folder), services=(*SERVICES, GATEWAY), settings=settings)
        try:
            rows = asyncio.run(bench(mesh, port, token, args))
        finally:
            mesh.close()
    if args.output == "json":
        print(
            json.dumps(
                {
                    "nodes": args.nodes,
                    "workers": args.workers,
                    "seconds": args.seconds,
                    "rows": [asdict(r) for r in rows],
                }
            )
        )
    else:
        print_table(rows, args)
    return 0


def add_parsers(commands: Subcommands) -> None:
    """`corral bench gateway`."""
    parser = commands.add_parser(
        "gateway", help="requests/s and latency of the HTTP API beside the Python client", description=__doc__
    )
    add_output_argument(parser, ("table", "json"), json=True)
    parser.add_argument("--nodes", type=positive_int, default=1000, help="registered nodes (default: 1000)")
    parser.add_argument("--seconds", type=positive_int, default=5, help="seconds per measurement (default: 5)")
    parser.add_argument("--workers", type=positive_int, default=8, help="concurrent callers (default: 8)")
    parser.set_defaults(run=run, parser=parser)
