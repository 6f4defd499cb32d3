"""A JetStream store without room is a state the edges name, not an outage, and it passes by itself.

nats-server runs with a `max_file_store` limit from a configuration file the test writes; Corral's own requests and
events fill it, a filler stream takes what is left, then the limit is raised by a configuration reload (nats-server
goes on: nothing is restarted). Before, a client met a raw `ServiceUnavailableError` (`corral submit` printed a
traceback, the gateway answered 500) or waited its whole timeout for a decision the log could not store.
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import nats
import nats.js.errors
import pytest
from nats.js import api

from schemas import ActorPlaced, ActorSubmitted, NodeRegistered, Placed, ScheduleRequest
from services.client import Client, StorageFullError
from services.local.mesh import SERVICES, Mesh, start_mesh
from services.local.servers import free_port
from tests.integration.conftest import FAST, LASTING_NODES, configured_servers, corral, holds_within, log_of, wait_ready
from tests.integration.gateway import AUTH, TOKEN, http_base
from tests.integration.gateway import wait_ready as gateway_ready
from tests.integration.log import read_events
from tests.integration.test_restart_and_snapshots import digest_of_a_replay_at

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

LIMIT = 40_000
"""The store's limit (bytes) at first: room for some dozens of decisions."""
RAISED = 64 * 1024 * 1024
"""The limit once the operator made room."""


def limit_store(config: Path, limit: int) -> None:
    """Write nats-server's configuration file with the store's limit at `limit` bytes."""
    config.write_text(f"jetstream {{ max_file_store: {limit} }}\n")


@pytest.fixture
def full_mesh(tmp_path: Path) -> Iterator[tuple[Mesh, Path]]:
    """A mesh with the gateway whose nats-server reads the store's limit from a file (local processes: the test
    reloads its configuration), and that file."""
    config = tmp_path / "nats.conf"
    limit_store(config, LIMIT)

    # A node's death would be an append of labels' own meeting the full store before the test's commands do.
    settings = {**FAST, **LASTING_NODES, "CORRAL_HTTP_PORT": str(free_port()), "CORRAL_HTTP_TOKEN": TOKEN}
    mesh = start_mesh(
        tmp_path / "mesh", services=(*SERVICES, "gateway"), settings=settings, servers=configured_servers(config)
    )
    try:
        gateway_ready(http_base(mesh))
        yield mesh, config
    finally:
        mesh.close()


async def fill_up(nats_url: str) -> None:
    """Take what room is left in the store with a stream of the test's own (ever smaller messages)."""
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        await js.add_stream(api.StreamConfig(name="FILLER", subjects=["filler"], storage=api.StorageType.FILE))
        for size in (4096, 512, 64, 1):
            while True:
                try:
                    await js.publish("filler", b"x" * size)
                except nats.js.errors.ServiceUnavailableError:
                    break
    finally:
        await nc.close()


async def assert_nothing_lost_or_doubled(client: Client, mesh: Mesh, before: dict[str, str]) -> None:
    """Every actor placed before is placed where it was, each decided once, and the scheduler's view is the fold of
    the log."""
    status = await client.status()
    assert before.items() <= {actor.actor_id: actor.node_id for actor in status.actors}.items()
    events = await read_events(mesh.nats_url)
    decided = Counter(e.request.actor_id for e in events if isinstance(e, ActorSubmitted | ActorPlaced) and e.request)
    assert set(decided.values()) == {1}
    live, replayed = await digest_of_a_replay_at(mesh, client, "scheduler")  # other services may append meanwhile
    assert live == replayed


async def reloaded(mesh: Mesh) -> bool:
    """Whether nats-server has reloaded its store's limit."""
    return "Reloaded: JetStream max_file_store" in mesh.nats.log_path.read_text()


async def registered(mesh: Mesh, node_id: str) -> bool:
    """Whether the log holds the registration of `node_id`."""
    return any(isinstance(e, NodeRegistered) and e.node_id == node_id for e in await read_events(mesh.nats_url))


async def test_a_full_store_is_named_at_every_edge_and_the_mesh_serves_again_once_it_has_room(
    full_mesh: tuple[Mesh, Path],
) -> None:
    mesh, config = full_mesh
    pids = {key: process.pid for key, process in mesh.processes.items()}
    async with Client(mesh.nats_url, timeout=10.0) as client:
        await wait_ready(client)
        await client.register_node("n1", {"CPU": 10_000})
        placed: dict[str, str] = {}
        with pytest.raises(StorageFullError) as refused:
            for index in range(2000):
                decision = await client.submit(ScheduleRequest(f"a{index}", {"CPU": 1}), timeout=10.0)
                assert isinstance(decision, Placed)
                placed[decision.id] = decision.node_id or ""
        print(f"the store of {LIMIT} bytes took {len(placed)} decisions; then: {refused.value}")
        assert placed
        assert str(refused.value).startswith(("the request queue is full: ", "the event log is full: "))
        assert "insufficient resources" in str(refused.value)
        assert refused.value.kind == "storage_full"

        await fill_up(mesh.nats_url)
        with pytest.raises(StorageFullError, match=r"^the request queue is full: insufficient resources"):
            await client.submit(ScheduleRequest("late", {"CPU": 1}), timeout=10.0)

        done = await corral(mesh, "submit", "cli-late", "--cpu", "1")
        assert done.returncode == 1, done
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        assert "the request queue is full: insufficient resources" in done.stderr

        async with httpx.AsyncClient(base_url=http_base(mesh), timeout=30.0) as http:
            answer = await http.post(
                "/api/v1/actors", json={"actor_id": "http-late", "resources": {"CPU": 1}}, headers=AUTH
            )
        assert answer.status_code == 507, answer.text
        assert answer.json()["kind"] == "storage_full" and answer.json()["status"] == 507
        assert answer.json()["error"].startswith("the request queue is full: insufficient resources")

        with pytest.raises(StorageFullError, match=r"^the event log is full: insufficient resources.*applied once"):
            await client.register_node("n2", {"CPU": 1}, heartbeat=False)  # appended once there is room
        with pytest.raises(StorageFullError, match=r"^the event log is full: insufficient resources.*nothing changed"):
            await client.register_node("n3", {"CPU": 1}, heartbeat=False)

        limit_store(config, RAISED)
        assert mesh.nats.process is not None
        mesh.nats.process.send_signal(signal.SIGHUP)  # a reload: nats-server goes on
        assert await holds_within(lambda: reloaded(mesh), timeout=10.0)

        after = await client.submit(ScheduleRequest("after", {"CPU": 1}), timeout=20.0)
        assert isinstance(after, Placed) and after.node_id == "n1"
        assert await holds_within(lambda: registered(mesh, "n2"), timeout=10.0)  # the command told to wait: applied
        await assert_nothing_lost_or_doubled(client, mesh, placed)
        assert not await registered(mesh, "n3")  # the command refused at once: nothing changed

    assert {key: process.pid for key, process in mesh.processes.items()} == pids  # nothing was restarted
    labels = log_of(mesh, "labels")
    unconfirmed = [line for line in labels.splitlines() if "not confirmed" in line]
    assert len(unconfirmed) == 1 and "insufficient resources" in unconfirmed[0], unconfirmed
    assert "appends confirmed again" in labels
