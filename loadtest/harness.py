"""The load test's phases: register nodes, drive Corral, then at half its rate, inside tenants, the bus floor."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import secrets
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from loadtest.autoscaled import (
    EXISTING_NODES,
    HOLD,
    IDLE_TIMEOUT_S,
    SCALE_DOWN_GRACE_S,
    SETTLE_S,
    USERS,
    AutoscaledTarget,
    AutoscalerFigures,
    autoscaler_figures,
    start_autoscaled_mesh,
    wait_scaled_down,
    wait_settled,
)
from loadtest.autoscaled import WORKLOADS as AUTOSCALED_WORK
from loadtest.autoscaler_latency import timed_events
from loadtest.costs import costs_of
from loadtest.floor import decider as floor
from loadtest.floor import drive as floor_drive
from loadtest.nodes import node_shapes, register_nodes, wait_until_seen
from loadtest.procs import CpuMeter
from loadtest.report import Phase, Report, autoscaler_goals, cost_goals, goals, replicas_goal
from loadtest.stats import Recorder, latency
from loadtest.tenants import (
    InsideTenants,
    TenantFigures,
    create_tenants,
    drain_queue,
    queue_behind,
    tenant_figures,
    tenant_specs,
)
from loadtest.transport import Connection, CorralTarget, FloorTarget, Replies, Target
from loadtest.users import Drive, Outcome, closed_loop, open_loop
from loadtest.workloads import REMOVE, WORKLOADS, Workload
from schemas import subjects as s
from services import CORE_BUILD
from services.client import Client, CorralError
from services.local.cluster import NatsCluster, start_cluster, wait_for_jetstream
from services.local.mesh import DECIDER, SERVICES, Mesh, decision_workers, start_mesh
from services.local.servers import redis_server
from services.runtime import collector


@dataclass(frozen=True)
class Config:
    """What to run: the cluster, the users and each phase's length (0 s skips the floor or fixed-rate phase)."""

    nodes: int = 1000
    users: int = 50
    duration: float = 10.0
    floor_duration: float = 10.0
    fixed_duration: float = 10.0
    rate: float = 0.0
    """0: closed-loop users as fast as replies come; above 0: open loop at this many requests per second."""
    warmup: float = 1.0
    hold: int = 20
    connections: int = 4
    timeout: float = 10.0
    register_in_flight: int = 100
    seed: int = 0
    quiet: bool = False
    tenants: int = 200
    """Virtual clusters for the tenants phase (0 skips it)."""
    floor_processes: int = max(1, (os.cpu_count() or 1) // 4)
    """Generator and decider processes of the floor phase, each (1: the users in this process, as for Corral)."""
    autoscaler_duration: float = 8.0
    """Seconds the users of the autoscaler phase run, on a mesh of its own with the autoscaler (0 skips it)."""
    replicas: int = 1
    """nats-servers of the embedded mesh, clustered on loopback, every stream on all of them (`CORRAL_REPLICAS`)."""
    baseline_share: float | None = None
    """The floor share of an earlier run at one replica, to judge this run's replicas against."""
    batch: int = 1
    """Requests per message in the Corral, floor, fixed-rate and tenants phases (above 1: `corral.req.batch`)."""


def progress(config: Config, text: str) -> None:
    """A progress line on stderr (the report goes to stdout)."""
    if not config.quiet:
        print(text, file=sys.stderr, flush=True)


async def wait_for_services(client: Client, timeout: float = 30.0) -> None:
    """Wait until the labels service and the leading scheduler answer queries."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            await client.nodes()
            await client.status()
            return
        except CorralError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


def _phase(
    name: str,
    target: Target,
    drive: Drive,
    recorder: Recorder,
    outcome: Outcome,
    cpu: dict[str, float],
    decider: floor.DeciderFigures | None = None,
    workloads: tuple[Workload, ...] = WORKLOADS,
) -> Phase:
    rows = recorder.rows([workload.name for workload in workloads] + [REMOVE])
    total = rows[-1]
    removes = recorder.tallies[REMOVE].requests if REMOVE in recorder.tallies else 0
    seconds = recorder.seconds
    placements_per_s = round(total["placed"] / seconds, 1)
    requests_per_s = round(total["requests"] / seconds, 1)
    return Phase(
        name=name,
        target=target.name,
        description=target.description if drive.batch == 1 else target.description.replace(s.SCHEDULE, s.BATCH),
        mode="open" if drive.rate > 0 else "closed",
        users=drive.users,
        batch=drive.batch,
        rate_target=drive.rate,
        seconds=round(seconds, 3),
        requests=total["requests"],
        placements=total["placed"],
        pending=total["pending"],
        errors=total["errors"],
        removes=removes,
        placements_per_s=placements_per_s,
        decisions_per_s=round((total["placed"] + total["pending"]) / seconds, 1),
        requests_per_s=requests_per_s,
        latency_ms=latency(recorder.placed_latencies_ms),
        rows=rows,
        cpu=cpu,
        costs=costs_of(cpu, placements_per_s, requests_per_s, serial=not isinstance(target, FloorTarget)),
        dropped=outcome.dropped,
        lag_p99_ms=outcome.lag_p99_ms,
        lag_max_ms=outcome.lag_max_ms,
        unfinished=outcome.unfinished,
        first_error=recorder.first_error(),
        decider=decider,
    )


async def drive_phase(
    name: str,
    target: Target,
    conns: Sequence[Connection],
    drive: Drive,
    config: Config,
    pids: dict[str, int],
    workloads: tuple[Workload, ...] = WORKLOADS,
) -> tuple[Phase, Outcome]:
    """Run one phase (closed or open loop, requests drawn from `workloads`) and measure it, with each process's CPU."""
    _announce(config, name, target, drive)
    recorder, outcome, cpu = await _users(target, conns, drive, config.timeout, pids, workloads)
    return _phase(name, target, drive, recorder, outcome, cpu, workloads=workloads), outcome


Measured = tuple[Recorder, Outcome, dict[str, float]]
"""What running users leaves: their results, what they hold, each process's share of a core over the window."""


def _announce(config: Config, name: str, target: Target, drive: Drive) -> None:
    how = f"{drive.users} users" if drive.rate <= 0 else f"{drive.rate:,.0f} req/s"
    how += f", batches of {drive.batch}" if drive.batch > 1 else ""
    progress(config, f"{name}: {target.name}, {how}, {drive.warmup:g} s warm-up + {drive.seconds:g} s")


async def _users(
    target: Target,
    conns: Sequence[Connection],
    drive: Drive,
    timeout: float,
    pids: dict[str, int],
    workloads: tuple[Workload, ...] = WORKLOADS,
) -> Measured:
    window = asyncio.create_task(CpuMeter(pids).window(drive.warmup, drive.seconds))  # the recorder's window
    with collector.paused(collect_after=True):  # the generator must not stall on its own results
        if drive.rate > 0:
            recorder, outcome = await open_loop(target, conns, drive, drain_timeout=timeout + 1)
        else:
            recorder, outcome = await closed_loop(target, conns, drive, workloads)
    return recorder, outcome, await window


def _merged(parts: Sequence[Measured]) -> Measured:
    """Several runs of users as one: their results over a window as long as theirs together, each process's share of
    a core averaged over them."""
    seconds = sum(recorder.seconds for recorder, _, _ in parts)
    recorder, outcome = Recorder(0.0, seconds), Outcome()
    for part, left, _ in parts:
        recorder.absorb(part)
        outcome.absorb(left)
    names = set.intersection(*(set(cpu) for _, _, cpu in parts))
    cpu = {name: round(sum(cpu[name] * part.seconds for part, _, cpu in parts) / seconds, 4) for name in sorted(names)}
    return recorder, outcome, cpu


async def floor_phase(
    conns: Sequence[Connection], drive: Drive, config: Config, nats_url: str, pids: dict[str, int]
) -> Phase:
    """The same drive through the floor's streams and no-op decider processes; the streams are deleted after.

    With `config.floor_processes` above 1, that many decider processes share the work queue and as many generator
    processes share the users (`loadtest.floor.drive`), so the floor is the bus's and not one process's."""
    bus = conns[0].client.bus
    await floor.create_streams(bus, config.replicas)
    count = config.floor_processes
    deciders = []
    try:
        for _ in range(count):
            deciders.append(
                await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "loadtest.floor", "--nats-url", nats_url, stdout=asyncio.subprocess.PIPE
                )
            )
        for decider in deciders:
            assert decider.stdout is not None
            ready = await asyncio.wait_for(decider.stdout.readline(), timeout=30.0)
            if not ready:
                raise RuntimeError(f"the no-op decider exited with status {await decider.wait()} before it was ready")
        names = ["floor-decider"] if count == 1 else [f"floor-decider-{index}" for index in range(count)]
        pids = {**pids, **{name: decider.pid for name, decider in zip(names, deciders, strict=True)}}
        if count == 1:
            phase, _ = await drive_phase("floor", FloorTarget(config.timeout), conns, drive, config, pids)
        else:
            phase = await drive_generators(drive, config, nats_url, pids)
        figures = []
        for decider in deciders:
            assert decider.stdout is not None
            decider.send_signal(signal.SIGTERM)
            figures_line = await asyncio.wait_for(decider.stdout.readline(), timeout=10.0)
            await asyncio.wait_for(decider.wait(), timeout=10.0)
            if figures_line:
                figures.append(json.loads(figures_line))
        phase["decider"] = floor.combined(figures) if figures else None
        return phase
    finally:
        for decider in deciders:
            if decider.returncode is None:
                decider.kill()
                await decider.wait()
        await floor.delete_streams(bus)


async def drive_generators(drive: Drive, config: Config, nats_url: str, pids: dict[str, int]) -> Phase:
    """The floor's drive from `config.floor_processes` generator processes, measured over one common window."""
    count = config.floor_processes
    progress(
        config,
        f"floor: {count} generator and {count} decider processes, {drive.users} users, "
        + (f"batches of {drive.batch}, " if drive.batch > 1 else "")
        + f"{drive.warmup:g} s warm-up + {drive.seconds:g} s",
    )
    start_at = time.time() + floor_drive.START_DELAY
    generators = [
        await floor_drive.spawn(nats_url, share, start_at, config.timeout, max(1, config.connections // count))
        for share in floor_drive.shares(drive, count)
    ]
    try:
        meter = CpuMeter({**pids, **{f"floor-generator-{i}": process.pid for i, process in enumerate(generators)}})
        await asyncio.sleep(max(0.0, start_at + drive.warmup - time.time()))
        meter.start()
        await asyncio.sleep(drive.seconds)
        cpu = meter.stop()
        dumps = await asyncio.gather(*(floor_drive.finished(process) for process in generators))
    finally:
        for process in generators:
            if process.returncode is None:
                process.kill()
                await process.wait()
    recorder, outcome = floor_drive.merged(dumps, drive.seconds)
    return _phase("floor", FloorTarget(config.timeout), drive, recorder, outcome, cpu)


TENANT_PARTS: Final = ((True, 0.25), (False, 0.5), (True, 0.5), (False, 0.5), (True, 0.25))
"""The tenants phase's parts, each inside the tenants (True) or at the root, for a share of the phase's length: a
whole length of each, alternating, symmetric in time. This shared machine's speed drifts and swings within seconds;
measured so, a steady drift cancels and most of a swing lands on both."""


async def tenants_phase(
    clients: Sequence[Client],
    conns: Sequence[Connection],
    drive: Drive,
    config: Config,
    pids: dict[str, int],
    prefix: str,
) -> tuple[TenantFigures, Phase, Phase]:
    """Admit the tenants; drive the users inside them and at the root in alternating parts (`TENANT_PARTS`: the inside
    target compares the two); then queue clusters behind them and drain the queue; destroy every cluster the phase
    made after (the phases after it find the root as the first phase did)."""
    specs = tenant_specs(config.tenants, prefix, config.seed, config.batch)
    progress(config, f"tenants: creating {len(specs)} virtual clusters ({config.register_in_flight} in flight)")
    admitted, latencies, seconds, create_errors = await create_tenants(
        clients, specs, config.register_in_flight, config.timeout
    )
    root = CorralTarget(config.timeout)
    inside = InsideTenants(root, admitted or [spec.vc_id for spec in specs])
    parts: dict[bool, list[Measured]] = {True: [], False: []}
    for index, (inside_part, share) in enumerate(TENANT_PARTS):
        part = dataclasses.replace(drive, seconds=drive.seconds * share, tag=f"{drive.tag}{index}")
        name, target = ("tenants", inside) if inside_part else ("tenants_root", root)
        _announce(config, name, target, part)
        parts[inside_part].append(await _users(target, conns, part, config.timeout, pids))
        await _remove_all(config, conns, parts[inside_part][-1][1].held, [])  # the next part finds what this one did
    phase = _phase("tenants", inside, drive, *_merged(parts[True]))
    root_phase = _phase("tenants_root", root, drive, *_merged(parts[False]))
    root_phase["description"] += ", in parts between the tenants phase's"
    waiting_count = max(1, config.tenants // 20)
    progress(config, f"tenants: {waiting_count} clusters queue behind the tenants; destroying tenants drains them")
    waiting = await queue_behind(clients[0], prefix, waiting_count, config.timeout)
    drained, drain_errors = await drain_queue(clients[0], admitted, waiting, config.timeout)
    figures = tenant_figures(specs, admitted, latencies, seconds, len(waiting), drained, [create_errors, drain_errors])
    for info in await clients[0].virtual_clusters():  # every cluster the phase made, with the work inside it
        if info.cluster_id.startswith(prefix) and info.parent is None:
            await clients[0].destroy_virtual_cluster(info.cluster_id, force=True, timeout=config.timeout)
    return figures, phase, root_phase


async def autoscaler_phase(config: Config, data_dir: Path | None, prefix: str) -> tuple[AutoscalerFigures, Phase]:
    """On a mesh of its own with the autoscaler: users whose work only launched nodes can host, until their last
    actors are placed; then those are removed and the idle nodes scaled down. Figures and checks from its log."""
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="corral-loadtest-")))
        progress(config, "autoscaler: starting a mesh with the autoscaler (local provider)")
        mesh = await asyncio.to_thread(start_autoscaled_mesh, data_dir / "autoscaler")
        try:
            async with connected(mesh.nats_url, 2, config.timeout) as (clients, conns):
                await wait_for_services(clients[0])
                await clients[0].wait_autoscaler(timeout=30.0)
                shapes = node_shapes(EXISTING_NODES, prefix)
                await register_nodes(clients, shapes, quiet=True)
                await wait_until_seen(clients[0], prefix + "-", len(shapes))
                drive = Drive(
                    tag=prefix, users=USERS, seconds=config.autoscaler_duration, warmup=0.0, hold=HOLD, seed=config.seed
                )
                target = AutoscaledTarget(config.timeout)
                phase, outcome = await drive_phase(
                    "autoscaler", target, conns, drive, config, mesh_pids(mesh), AUTOSCALED_WORK
                )
                await wait_settled(clients[0], SETTLE_S)
                settled_at = time.time()
                await _remove_all(config, conns, outcome.held, [])
                progress(config, f"autoscaler: waiting for the idle nodes to go (idle timeout {IDLE_TIMEOUT_S:g} s)")
                scale_down = await wait_scaled_down(clients[0], IDLE_TIMEOUT_S + SCALE_DOWN_GRACE_S)
                events = await timed_events(mesh.nats_url)
            return autoscaler_figures(events, settled_at, scale_down), phase
        finally:
            await asyncio.to_thread(mesh.stop)
    raise AssertionError("unreachable")


@contextlib.asynccontextmanager
async def connected(nats_url: str, count: int, timeout: float) -> AsyncIterator[tuple[list[Client], list[Connection]]]:
    """`count` client connections to `nats_url`, each with its reply inbox; closed after."""
    clients = [Client(nats_url, name=f"loadtest-{i}", timeout=timeout) for i in range(count)]
    conns: list[Connection] = []
    try:
        for client in clients:
            await client.connect()
            conns.append(Connection(client, Replies(client)))
            await conns[-1].replies.start()
        yield clients, conns
    finally:
        for client in clients:
            await client.close()


async def _remove_all(config: Config, conns: Sequence[Connection], actors: list[str], nodes: list[str]) -> None:
    """Take these actors and nodes out of the mesh (best effort)."""
    gate = asyncio.Semaphore(config.register_in_flight)

    async def remove(index: int, actor: str | None, node: str | None) -> None:
        client = conns[index % len(conns)].client
        async with gate:
            with contextlib.suppress(CorralError, TimeoutError, AssertionError):
                if actor is not None:
                    await client.remove_actor(actor)
                if node is not None:
                    await client.remove_node(node)

    progress(config, f"cleaning up: {len(actors):,} actors, {len(nodes):,} nodes")
    await asyncio.gather(*(remove(i, actor, None) for i, actor in enumerate(actors)))
    await asyncio.gather(*(remove(i, None, node) for i, node in enumerate(nodes)))


async def run_load(
    config: Config,
    nats_url: str,
    pids: dict[str, int] | None = None,
    *,
    clean_up: bool,
    data_dir: Path | None = None,
) -> Report:
    """Every phase against the mesh at `nats_url`; `pids` names the processes whose CPU is reported. The autoscaler
    phase starts a mesh of its own, in `data_dir`/autoscaler (default: a temporary folder)."""
    pids = {**(pids or {}), "loadtest": os.getpid()}
    run = secrets.token_hex(2)
    async with connected(nats_url, config.connections, config.timeout) as (clients, conns):
        await wait_for_services(clients[0])
        prefix = f"lt{run}"
        shapes = node_shapes(config.nodes, prefix)
        progress(config, f"registering {config.nodes:,} nodes ({config.register_in_flight} in flight)")
        registration = await register_nodes(clients, shapes, in_flight=config.register_in_flight, quiet=config.quiet)
        await wait_until_seen(clients[0], prefix + "-", config.nodes)

        phases: dict[str, Phase] = {}
        held: list[str] = []
        base = Drive(
            tag="",
            users=config.users,
            seconds=config.duration,
            warmup=config.warmup,
            hold=config.hold,
            seed=config.seed,
            rate=config.rate,
            batch=config.batch,
        )
        corral = CorralTarget(config.timeout)
        phases["corral"], outcome = await drive_phase(
            "corral", corral, conns, dataclasses.replace(base, tag=f"{run}c"), config, pids
        )
        half = round(phases["corral"]["placements_per_s"] / 2, 1)
        held += outcome.held
        if config.fixed_duration > 0 and config.rate <= 0 and half > 0:  # right after: half the rate of this minute
            drive = dataclasses.replace(base, tag=f"{run}r", seconds=config.fixed_duration, rate=half)
            phases["fixed_rate"], outcome = await drive_phase("fixed_rate", corral, conns, drive, config, pids)
            held += outcome.held
        tenants = None
        if config.tenants > 0:
            await _remove_all(config, conns, held, [])  # the root starts as empty as the first phase found it
            held = []
            tenants, phases["tenants"], phases["tenants_root"] = await tenants_phase(
                clients, conns, dataclasses.replace(base, tag=f"{run}t"), config, pids, prefix
            )
        if config.floor_duration > 0:
            drive = dataclasses.replace(base, tag=f"{run}f", seconds=config.floor_duration)
            phases["floor"] = await floor_phase(conns, drive, config, nats_url, pids)
        share, targets = goals(phases)
        targets += cost_goals(phases)
        if config.replicas > 1:
            targets.append(replicas_goal(share, config.baseline_share, config.replicas))
        autoscaler = None
        if config.autoscaler_duration > 0:
            autoscaler, phases["autoscaler"] = await autoscaler_phase(config, data_dir, f"{prefix}a")
            targets += autoscaler_goals(autoscaler)
        if clean_up:
            await _remove_all(config, conns, held, [shape.node_id for shape in shapes])
        return Report(
            nats_url=nats_url,
            embedded_mesh=False,
            replicas=config.replicas,
            core="",
            nodes=config.nodes,
            users=config.users,
            connections=config.connections,
            hold=config.hold,
            registration_s=round(registration, 2),
            phases=phases,
            floor_share=share,
            targets=targets,
            tenants=tenants,
            autoscaler=autoscaler,
        )


def mesh_pids(mesh: Mesh, cluster: NatsCluster | None = None) -> dict[str, int]:
    """The process ids of an embedded mesh's servers and services (each server of `cluster` as nats-server-sN)."""
    pids = {name: process.pid for name, process in mesh.processes.items()}
    servers = [(mesh.nats.name, mesh.nats), (mesh.redis.name, mesh.redis)]
    if cluster is not None:
        servers = [(f"nats-server-s{index}", server) for index, server in enumerate(cluster.servers)] + servers[1:]
    for name, server in servers:
        if server.process is not None:
            pids[name] = server.process.pid
    return pids


def start_replicated_mesh(data_dir: Path, replicas: int, stack: contextlib.ExitStack) -> tuple[Mesh, NatsCluster]:
    """The services on `replicas` clustered nats-servers at `CORRAL_REPLICAS=replicas`, each connected to all of
    them; stopped with `stack`."""
    cluster = start_cluster(data_dir / "nats", replicas, name="corral-loadtest")
    stack.callback(cluster.close)
    asyncio.run(wait_for_jetstream(cluster.url))
    redis = redis_server(data_dir / "redis").start()
    settings = {"CORRAL_NATS_URL": cluster.url, "CORRAL_REPLICAS": str(replicas)}
    mesh = Mesh(data_dir / "mesh", cluster.servers[0], redis, settings=settings)
    mesh.data_dir.mkdir(parents=True)
    stack.callback(mesh.stop)
    for name in SERVICES:
        mesh.start_service(name)
    for index in range(decision_workers(mesh.env)):
        mesh.start_service(DECIDER, instance=f"{DECIDER}-{index + 1}")
    return mesh, cluster


def run(config: Config, nats_url: str | None = None, data_dir: Path | None = None) -> Report:
    """Run against `nats_url`, or start an embedded mesh (in `data_dir`, else a temporary folder) and stop it after."""
    if nats_url is not None:
        return asyncio.run(run_load(config, nats_url, clean_up=True))
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="corral-loadtest-")))
        progress(config, f"starting an embedded mesh in {data_dir} ({config.replicas} replica(s))")
        cluster = None
        if config.replicas > 1:
            mesh, cluster = start_replicated_mesh(data_dir, config.replicas, stack)
            url = cluster.url
        else:
            mesh = start_mesh(data_dir)
            stack.callback(mesh.stop)
            url = mesh.nats_url
        report = asyncio.run(run_load(config, url, mesh_pids(mesh, cluster), clean_up=False, data_dir=data_dir))
        report["embedded_mesh"], report["core"] = True, CORE_BUILD  # the mesh's services inherit this process's
        return report
    raise AssertionError("unreachable")
