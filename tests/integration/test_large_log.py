"""200,000 placed actors, written straight into the log, list completely through the client and the CLI.

Submitting that many through the scheduler would take minutes on a small machine, so the test writes the log a
scheduler would have written (a recorded election, the nodes, one `ActorPlaced` carrying its request per actor)
before the services start; they replay it, and every listing must hold exactly the actors written, each on its
node, in pages that all fit the server's payload limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator

import anyio
import nats
import pytest

from loadtest.replay.figures import ReplayConfig
from loadtest.replay.log import write_log
from schemas import ActorPlaced, AnyEvent, SchedulerElected, ScheduleRequest
from schemas import subjects as s
from schemas.commands import Heartbeat
from schemas.queries import StatusQuery, StatusReply
from services.client import Client
from services.core import Cluster
from services.local.mesh import SERVICES, Mesh
from services.runtime.bus import Bus
from services.runtime.codec import decode, encode
from services.runtime.settings import Settings
from tests.integration.conftest import FAST, log_of

pytestmark = [pytest.mark.anyio, pytest.mark.scale]

ACTORS = 200_000
NODES = 20
EPOCH = 1
WRITER = "log-writer"


def placed_log() -> tuple[list[AnyEvent], dict[str, str]]:
    """The scheduler's log for `ACTORS` one-CPU actors spread over `NODES` nodes, and actor id -> node id."""
    elected = SchedulerElected(epoch=EPOCH, instance=WRITER, event_id=f"scheduler-elected-{EPOCH}")
    cluster = Cluster(0, keep_history=False)
    cluster.fold(elected, react=False)
    cluster.epoch, cluster.event_prefix = EPOCH, f"{WRITER}-e{EPOCH}-"

    def add_nodes() -> None:
        for index in range(NODES):
            cluster.add_node(f"node-{index:02d}", {"CPU": ACTORS}, {}, zone="z0")

    events: list[AnyEvent] = [elected, *cluster.decided(add_nodes).events]
    placements = {f"actor-{n:06d}": f"node-{n % NODES:02d}" for n in range(ACTORS)}
    for actor_id, node_id in placements.items():  # as the core writes a placement made as submitted
        request = ScheduleRequest(actor_id, {"CPU": 1}, labels={"app": "bulk"})
        events.append(
            ActorPlaced(
                actor_id,
                node_id,
                request=request,
                event_id=f"{WRITER}-e{EPOCH}-{len(events)}",
                correlation_id=actor_id,
                epoch=EPOCH,
            )
        )
    return events, placements


@contextlib.asynccontextmanager
async def heartbeats(nats_url: str, node_ids: list[str], interval: float) -> AsyncIterator[None]:
    """Every node heartbeats, as its agent would, while the block runs (or the mesh declares them dead)."""
    connection = await nats.connect(nats_url)

    async def beat() -> None:
        while True:
            for node_id in node_ids:
                await connection.publish(s.heartbeat_subject(node_id), encode(Heartbeat(node_id)))
            await asyncio.sleep(interval)

    beating = asyncio.create_task(beat())
    try:
        yield
    finally:
        beating.cancel()
        await connection.close()


async def corral(mesh: Mesh, *args: str) -> str:
    """What `corral ARGS` prints (run without blocking the test's loop: the heartbeats go on meanwhile)."""
    command = [sys.executable, "-m", "services.cli", *args, "--nats-url", mesh.nats_url, "--timeout", "30"]
    done = await anyio.run_process(command, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


async def status_page_sizes(client: Client) -> list[int]:
    """The size in bytes of every page of the scheduler's status, read one by one."""
    sizes, cursor = [], ""
    while True:
        answer = await client.bus.nc.request(s.STATUS_QUERY, encode(StatusQuery(cursor=cursor)), timeout=30)
        sizes.append(len(answer.data))
        cursor = decode(answer.data, StatusReply).next
        if not cursor:
            return sizes


async def test_two_hundred_thousand_placed_actors_list_completely_in_pages_under_the_payload_limit(
    servers: Mesh,
) -> None:
    events, placements = placed_log()
    settings = Settings(nats_url=servers.nats_url, redis_url=servers.env["CORRAL_REDIS_URL"])
    writer = await Bus.connect(settings, WRITER)
    try:
        await write_log(writer, events, ReplayConfig(quiet=True))
    finally:
        await writer.close()

    node_ids = sorted(set(placements.values()))
    # This process decodes 200,000 actors between beats, which can stall them past FAST's timeout on a loaded
    # machine: the nodes would die and their actors restart. Liveness is not what this test checks.
    servers.env["CORRAL_HEARTBEAT_TIMEOUT"] = "60"
    async with heartbeats(servers.nats_url, node_ids, float(FAST["CORRAL_HEARTBEAT_INTERVAL"])):
        for name in SERVICES:
            servers.start_service(name)
        async with Client(servers.nats_url, timeout=30.0) as client:
            await client.wait_ready(timeout=180.0)  # a replay of 200,000 actors beside three busy test workers
            status = await client.status()
            assert len(status.actors) == ACTORS
            assert {actor.actor_id: actor.node_id for actor in status.actors} == placements
            assert {actor.status for actor in status.actors} == {"placed"}
            assert [(node.node_id, node.actors) for node in status.nodes] == [(n, ACTORS // NODES) for n in node_ids]
            assert await client.placements() == placements
            labelled = await client.actors({"app": "bulk"})
            assert len(labelled) == ACTORS
            assert {actor.actor_id: actor.node_id for actor in labelled} == placements

            sizes = await status_page_sizes(client)
            assert len(sizes) > 1
            assert max(sizes) <= client.bus.nc.max_payload

        listed = json.loads(await corral(servers, "status", "-o", "json"))["actors"]
        assert len(listed) == ACTORS, [
            line for name in SERVICES for line in log_of(servers, name).splitlines() if "WARN" in line
        ][:30]
        assert {actor["actor_id"]: actor["node_id"] for actor in listed} == placements
        table = (await corral(servers, "status")).splitlines()
        assert f"ACTORS ({ACTORS}):" in table
        rows = {line.split()[0]: line.split()[2] for line in table if line.startswith("actor-")}
        assert rows == placements

    for service in SERVICES:
        assert "maximum payload exceeded" not in log_of(servers, service)
