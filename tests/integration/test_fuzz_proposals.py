"""Fuzz of the applier's subject (`corral.plan.scheduler`, decision workers on) against one real mesh: forged and
broken proposal batches (`forgeries.py`) from anyone on the bus, each sent while a real request goes through the
real workers (one the applier cannot read goes alone and must leave the log as it was). After each batch every
process is alive and the applier still answers; at the end no node is over-allocated, nothing reached a Corral or
JetStream subject a forger named, a new actor is still placed (with workers on, the scheduler pulls no request: a
worker proposed it), and every live view (each worker's too) equals a replay of the log.

`make test` sends CORRAL_FUZZ_EXAMPLES / 2 batches (12; 100 when unset); `make fuzz` many more. Not shrunk (see
test_fuzz.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import nats.errors
import pytest
from hypothesis import given
from hypothesis import strategies as st
from nats.aio.msg import Msg

from loadtest.chaos.figures import fold_log
from loadtest.digests import MESH_SERVICES, check_digests
from schemas import Placed, ScheduleRequest
from schemas import subjects as s
from schemas.proposals import Proposals
from schemas.vclusters import VirtualCluster
from services.client import Client, CorralError, RejectedError
from services.core.errors import CodecError
from services.core.state import replay
from services.local.mesh import Mesh
from services.runtime.bus import Bus
from services.runtime.codec import MAX_DEPTH, decode, encode
from services.runtime.settings import Settings
from services.scheduler.applier import NESTING
from tests.integration.conftest import log_of, start_test_mesh
from tests.integration.forgeries import (
    CLUSTER,
    FULL_NODE,
    LABELLED_NODE,
    LABELS,
    LIVE_NODE,
    REMOVED_NODE,
    RESIDENT,
    TAINTED_NODE,
    WATCHED,
    Scene,
    hostile_batches,
    reply_subjects,
)
from tests.integration.payloads import Payload
from tests.integration.probe import differs_from_replay, does_not_place, on_one_mesh
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.integration, pytest.mark.fuzz]

EXAMPLES = max(1, int(os.environ.get("CORRAL_FUZZ_EXAMPLES", "200")) // 2)
WORKERS = 2
ANSWER_S = 20.0
"""How long the applier (a barrier batch) and a real request may take to be answered after a forged batch."""
MESH_SETTINGS = {"CORRAL_DECISION_WORKERS": str(WORKERS), "CORRAL_HEARTBEAT_TIMEOUT": "3600"}
"""Decision workers on; nodes never declared dead (hypothesis draws between examples, with the loop stopped)."""


class ProposalFuzzer:
    """One mesh with decision workers (its scene set), a client and a watch of the subjects a forger names, on one
    event loop."""

    def __init__(self, mesh: Mesh, runner: asyncio.Runner, stack: contextlib.AsyncExitStack) -> None:
        self.mesh, self.runner = mesh, runner
        self.settings = Settings.from_env(mesh.env)
        self.client: Client = runner.run(stack.enter_async_context(Client(mesh.nats_url, timeout=10.0)))
        self.bus: Bus = runner.run(Bus.connect(self.settings, "proposal-fuzzer"))
        stack.push_async_callback(self.bus.close)
        self.inbox = self.bus.nc.new_inbox()
        self.seen: list[tuple[str, bytes]] = []
        """Messages on the watched subjects once the scene is set (none should come)."""
        self.virtual_nodes = runner.run(_set_the_scene(self.client))
        for subject in WATCHED:
            runner.run(self.bus.nc.subscribe(subject, cb=self._seen))
        self.sent = 0
        self.tally: Counter[str] = Counter()

    async def _seen(self, msg: Msg) -> None:
        self.seen.append((msg.subject, msg.data[:200]))

    def scene(self) -> Scene:
        """What the mesh holds now."""
        requests = self.runner.run(self.bus.js.stream_info(s.REQUESTS_STREAM))
        fresh = tuple(f"new-{self.sent + 1}-{index}" for index in range(3))
        real = ScheduleRequest(f"real-{self.sent + 1}", {"CPU": 0.5})
        log_end = self.runner.run(self.bus.last_sequence())
        return Scene(log_end, requests.state.last_seq, self.inbox, fresh, real, self.virtual_nodes)

    def send(self, scene: Scene, payload: Payload, reply: str) -> None:
        """Send a forged batch while a real request goes through a worker; then the applier must still answer and
        the real request be decided. The real actor and the batch's fresh ones are removed again (through a worker
        too)."""
        self.runner.run(self._send(scene.real, payload, reply))
        self.runner.run(self._remove((scene.real.actor_id, *scene.fresh)))
        self.tally[f"{payload.family} -> {reply.split('.', maxsplit=1)[0] or 'no reply'}"] += 1

    async def _send(self, request: ScheduleRequest, payload: Payload, reply: str) -> None:
        """A batch the applier can read goes out while the real request is decided; one it cannot read goes first,
        alone, and must leave the log as it was."""
        self.sent += 1
        readable = self._readable(payload.data)
        before = await self.bus.last_sequence()
        real = asyncio.ensure_future(self._decided(request, payload)) if readable else None
        try:
            with contextlib.suppress(nats.errors.MaxPayloadError):
                await self.bus.nc.publish(s.PROPOSALS, payload.data, reply=reply)
            try:  # the applier takes batches in order: this one is answered once the forged one is applied
                await self.bus.nc.request(s.PROPOSALS, encode(Proposals("fuzz-barrier", 0, [])), timeout=ANSWER_S)
            except (nats.errors.TimeoutError, nats.errors.NoRespondersError) as error:
                self.fail(f"the applier answered no batch after {payload!r}: {type(error).__name__}")
            if not readable and (after := await self.bus.last_sequence()) != before:
                self.fail(f"{payload!r}, not a readable batch, changed the log ({before} -> {after})")
        finally:
            await (real or self._decided(request, payload))

    def _readable(self, data: bytes) -> bool:
        """Whether the applier reads `data` as a batch (as it decodes one)."""
        try:
            decode(data, Proposals, max_bytes=self.bus.nc.max_payload, max_depth=MAX_DEPTH + NESTING)
        except CodecError:
            return False
        return True

    async def _decided(self, request: ScheduleRequest, payload: Payload) -> None:
        try:
            await self.client.submit(request, timeout=ANSWER_S)
        except CorralError as error:
            self.fail(f"the real request sent beside {payload!r} was not decided: {error}")

    async def _remove(self, actors: tuple[str, ...]) -> None:
        for actor in actors:
            with contextlib.suppress(RejectedError):  # not placed by the batch, or removed by it already
                await self.client.remove_actor(actor)

    def fail(self, context: str) -> None:
        """Fail naming the services that exited and the end of their logs."""
        dead = {key: code for key, process in self.mesh.processes.items() if (code := process.poll()) is not None}
        tails = "\n".join(f"--- {key} (exit {code}):\n{log_of(self.mesh, key)[-2000:]}" for key, code in dead.items())
        pytest.fail(f"{context}; exited: {dead}\n{tails}", pytrace=False)

    def assert_alive(self, context: str) -> None:
        """Every service process still runs (the scheduler, both workers and the rest)."""
        if any(process.poll() is not None for process in self.mesh.processes.values()):
            self.fail(context)


async def _set_the_scene(client: Client) -> tuple[str, ...]:
    """A live node with room, a full one (its one CPU taken by a real actor), a tainted, a labelled and a removed
    one, and a virtual cluster: the ids of its virtual nodes."""
    await client.wait_ready(timeout=30.0)
    await client.register_node(LIVE_NODE, {"CPU": 8})
    await client.register_node(FULL_NODE, {"CPU": 1}, labels={"full": "yes"})
    await client.register_node(TAINTED_NODE, {"CPU": 8}, taints={"dedicated": "x"})
    await client.register_node(LABELLED_NODE, {"CPU": 8}, labels=LABELS)
    await client.register_node(REMOVED_NODE, {"CPU": 8})
    await client.remove_node(REMOVED_NODE)
    placed = await client.submit(ScheduleRequest(RESIDENT, {"CPU": 1}, label_selector={"full": "yes"}), timeout=20.0)
    assert isinstance(placed, Placed) and placed.node_id == FULL_NODE, placed
    spec = VirtualCluster(flexible_resource_min={"CPU": 1}, flexible_resource_max={"CPU": 2})
    await client.create_virtual_cluster(CLUSTER, spec, timeout=20.0)
    return tuple(node.node_id for node in await client.nodes(vcluster_id=CLUSTER))


@pytest.fixture(scope="module")
def fuzzer(tmp_path_factory: pytest.TempPathFactory, server_path: ServerPath) -> Iterator[ProposalFuzzer]:
    """A mesh with decision workers for the whole module, and the fuzzer's connections to it."""
    folder = Path(tmp_path_factory.mktemp("fuzz-proposals"))
    mesh = start_test_mesh(folder / "mesh", server_path, settings=MESH_SETTINGS)
    try:
        with asyncio.Runner() as runner:
            stack = contextlib.AsyncExitStack()
            try:
                fuzzing = ProposalFuzzer(mesh, runner, stack)
                yield fuzzing
            finally:
                runner.run(stack.aclose())
    finally:
        mesh.close()


async def _log_problems(fuzzer: ProposalFuzzer) -> list[str]:
    """What the log shows wrong: an entry not readable, purged or on a watched subject, a node over-allocated, an
    actor placed twice."""
    problems = []
    last = await fuzzer.bus.last_sequence()
    entries = []
    async for entry in fuzzer.bus.read_log(1):
        entries.append(entry)
        if entry.sequence >= last and entry.last:
            break
    messages = [entry.sequence for entry in entries if entry.last]
    if messages != list(range(1, last + 1)):
        problems.append(f"the log is not whole: {len(messages)} messages up to {last}")
    problems += [f"unreadable entry {e.sequence} on {e.subject}" for e in entries if e.event is None]
    problems += [f"entry {e.sequence} on a forger's inbox {e.subject}" for e in entries if e.subject in WATCHED]
    events = [entry.event for entry in entries if entry.event is not None]
    fold = fold_log(events)
    problems += [f"{o.node_id} {o.resource} over-allocated: {o.used:g}/{o.capacity:g}" for o in fold.overfull]
    problems += [f"{actor} placed twice" for actor in fold.doubled]
    view = replay(events)
    problems += [f"{n.node_id}: free {n.free}" for n in view.nodes.values() if any(v < 0 for v in n.free.values())]
    return problems


def test_forged_and_broken_proposal_batches_change_nothing_decided_and_stop_nothing(fuzzer: ProposalFuzzer) -> None:
    """Forged, duplicated, many and broken batches with real requests between; then the mesh is whole."""

    @on_one_mesh(EXAMPLES)
    @given(st.data())
    def one_batch(data: st.DataObject) -> None:
        scene = fuzzer.scene()
        fuzzer.send(scene, data.draw(hostile_batches(scene), "batch"), data.draw(reply_subjects(scene), "reply"))
        fuzzer.assert_alive(f"after batch {fuzzer.sent}")

    one_batch()
    print(f"{fuzzer.sent} batches sent:", dict(sorted(fuzzer.tally.items())))
    fuzzer.assert_alive(f"after {fuzzer.sent} batches")
    problems = [problem] if (problem := fuzzer.runner.run(does_not_place(fuzzer.mesh))) else []
    problems += [f"published to {subject}: {data!r}" for subject, data in fuzzer.seen]
    problems += fuzzer.runner.run(_log_problems(fuzzer))
    checks = fuzzer.runner.run(check_digests(fuzzer.settings, fuzzer.bus, MESH_SERVICES, timeout=20.0))
    problems += [f"{check.service}: live digest != replay ({check.detail})" for check in checks if not check.equal]
    if worker_problem := fuzzer.runner.run(differs_from_replay(fuzzer.bus, "decider", WORKERS)):
        problems.append(worker_problem)
    assert not problems, f"after {fuzzer.sent} batches: " + "; ".join(problems)
