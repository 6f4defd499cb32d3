"""Hostile messages on a client's heartbeat reply subjects (`<inbox>.<token>`, where `labels` answers the heartbeat of
a node its log does not hold): a known node's token makes the client register that node again, which resumes it
and changes nothing; any other subject or payload is ignored. Afterwards the client still heartbeats every node, the
nodes are live, the log holds no new event, and the client still places work. CORRAL_FUZZ_EXAMPLES messages (25 in
`make test`, many more in `make fuzz`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Iterator

import nats
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nats.aio.client import Client as NatsClient

from schemas import Placed, ScheduleRequest
from schemas import subjects as s
from services.client import Client
from services.core.labels import UNREACHABLE_TAINT
from services.local.mesh import Mesh
from tests.integration.conftest import wait_ready
from tests.integration.watchers import last_sequence

pytestmark = [pytest.mark.integration, pytest.mark.fuzz]

EXAMPLES = int(os.environ.get("CORRAL_FUZZ_EXAMPLES", "200"))
NODES = ("hb1", "hb-2.x")
"""The agent's nodes; the second id is not a subject token as it is (its reply token is `~` and hex)."""

tokens = st.one_of(
    st.sampled_from([s.token(node) for node in NODES]),
    st.text(st.characters(min_codepoint=33, max_codepoint=126, exclude_characters=".*>"), min_size=1, max_size=20),
    st.sampled_from(["hb1x", "~", "~00", "HB1", "hb-2"]),
)
payloads = st.one_of(st.binary(max_size=64), st.binary(min_size=60_000, max_size=70_000), st.just(b'{"node_id":"x"}'))


@pytest.fixture
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as running:
        yield running


@contextlib.contextmanager
def agent_of(mesh: Mesh) -> Iterator[None]:
    """A node agent holding `NODES`, heartbeating on a loop of its own for as long as the block runs (the test's
    loop stops between examples: an agent there would fall silent)."""
    registered, stopping = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    async def run() -> None:
        async with Client(mesh.nats_url, timeout=10.0) as agent:
            await wait_ready(agent)
            for node in NODES:
                await agent.register_node(node, {"CPU": 4})
            registered.set()
            while not stopping.is_set():
                await asyncio.sleep(0.05)

    def thread() -> None:
        try:
            asyncio.run(run())
        except BaseException as error:  # said in the test, not lost in the thread
            failures.append(error)
            registered.set()

    beating = threading.Thread(target=thread, daemon=True)
    beating.start()
    try:
        assert registered.wait(60.0) and not failures, failures
        yield
    finally:
        stopping.set()
        beating.join(30.0)
    assert not failures, failures


def test_hostile_replies_to_heartbeats_change_nothing_and_the_nodes_stay_live(
    mesh: Mesh, runner: asyncio.Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORRAL_HEARTBEAT_INTERVAL", "0.2")  # the mesh's pace (FAST)
    with agent_of(mesh):
        client = Client(mesh.nats_url, timeout=10.0)
        runner.run(client.connect())
        forger = runner.run(nats.connect(mesh.nats_url))
        try:
            prefix = runner.run(_reply_prefix(forger))
            before = runner.run(last_sequence(mesh.nats_url))

            @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
            @given(token=tokens, payload=payloads)
            def forged(token: str, payload: bytes) -> None:
                runner.run(forger.publish(f"{prefix}.{token}", payload))

            forged()
            runner.run(forger.flush())
            runner.run(_heartbeats_of_every_node(forger))
            assert runner.run(last_sequence(mesh.nats_url)) == before, "a forged answer changed the log"
            live = {node.node_id: node for node in runner.run(client.nodes())}
            assert set(live) == set(NODES), live
            unreachable = [node.node_id for node in live.values() for t in node.taints if t.key == UNREACHABLE_TAINT]
            assert not unreachable, live
            decision = runner.run(client.submit(ScheduleRequest("after-forgery", {"CPU": 1})))
            assert isinstance(decision, Placed) and decision.node_id in NODES
        finally:
            runner.run(forger.close())
            runner.run(client.close())


async def _reply_prefix(nc: NatsClient) -> str:
    """The inbox under which the agent asks for answers to its heartbeats (read off one of them)."""
    sub = await nc.subscribe(s.heartbeat_subject(NODES[0]))
    try:
        msg = await sub.next_msg(timeout=10.0)
    finally:
        await sub.unsubscribe()
    assert msg.reply.endswith(f".{s.token(NODES[0])}"), msg.reply
    return msg.reply.rpartition(".")[0]


async def _heartbeats_of_every_node(nc: NatsClient) -> None:
    """Wait for a fresh heartbeat of each node (the agent's beating survived the forged answers)."""
    heard: set[str] = set()
    sub = await nc.subscribe(f"{s.PREFIX}.hb.*")
    try:
        async with asyncio.timeout(10.0):
            while heard != {s.token(node) for node in NODES}:
                heard.add((await sub.next_msg(timeout=10.0)).subject.rpartition(".")[2])
    finally:
        await sub.unsubscribe()
