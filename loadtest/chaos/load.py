"""The chaos run's load: nodes with heartbeats, actor submissions (label selectors, tolerations, spread, affinity,
inside virtual clusters too, alone or a few in one batch message), removals, taints, node churn and virtual clusters,
every request sent again with the same id while it goes unanswered (as a user would during an outage), each one
recorded for the figures."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import msgspec

from loadtest.chaos.figures import Kind, Request
from loadtest.nodes import NodeShape, node_shapes, register_node
from loadtest.workloads import Mix, Ticket
from schemas import ScheduleRequest, Taint, VirtualCluster
from schemas.replies import Rejected
from services.client import Client, RejectedError, ServiceFailedError

ATTEMPT_TIMEOUT = 5.0
"""Seconds one attempt waits for its answer before the request is sent again (same id)."""
RETRY_PAUSE = 0.5
PATIENCE = 15.0
"""Seconds a user waits for one request before going on with new ones (that request keeps being sent again)."""
CLUSTER_SPEC = VirtualCluster(flexible_resource_min={"CPU": 1.0}, flexible_resource_max={"CPU": 4.0})
OPERATIONS: dict[str, float] = {"submit": 52, "batch": 12, "remove": 28, "taint": 6, "vcluster": 1.7, "churn": 0.3}
"""What a user does next, by weight."""


@dataclass
class Ledger:
    """Every request of the run and when each was answered."""

    requests: dict[tuple[Kind, str], Request] = field(default_factory=dict)
    answers: list[float] = field(default_factory=list)

    def sent(self, kind: Kind, key: str) -> Request:
        """Record a send (or a resend of the same request)."""
        request = self.requests.get((kind, key))
        if request is None:
            request = self.requests[kind, key] = Request(kind, key, time.monotonic(), attempts=0)
        request.attempts += 1
        return request

    def answered(self, request: Request, refusal: str | None = None) -> None:
        """Record the answer (`refusal`: why it was refused)."""
        now = time.monotonic()
        request.answered_at, request.rejected, request.reason = now, refusal is not None, refusal or ""
        self.answers.append(now)


class Load:
    """Users driving one mesh through a few client connections until `stop_at`; requests still unanswered then are
    sent again until `give_up_at` (the settling time)."""

    def __init__(self, nats_url: str, *, nodes: int, users: int, seed: int) -> None:
        self.nats_url, self.users, self.seed = nats_url, users, seed
        self.shapes = _shapes(f"chaos{seed}")
        self.live_nodes: list[str] = []
        self.clusters: list[str] = []
        self.ledger = Ledger()
        self.stop_at = self.give_up_at = float("inf")
        self.connections: list[Client] = []
        self.node_count = nodes
        self.waiting: set[asyncio.Task[None]] = set()
        """Requests users stopped waiting for, still being sent again."""

    async def connect(self, count: int = 2) -> None:
        """Open the client connections and register the first nodes."""
        for index in range(count):
            client = Client(self.nats_url, name=f"chaos-{index}", timeout=ATTEMPT_TIMEOUT)
            await client.connect()
            self.connections.append(client)
        self.give_up_at = time.monotonic() + 60.0
        await asyncio.gather(*(self._add_node(random.Random(i)) for i in range(self.node_count)))

    async def close(self) -> None:
        for client in self.connections:
            await client.close()

    def _client(self, rng: random.Random) -> Client:
        return rng.choice(self.connections)

    async def run(self, seconds: float, settle: float) -> tuple[float, float]:
        """Drive the users for `seconds`; then let unanswered requests retry up to `settle` more; (start, end)."""
        start = time.monotonic()
        self.stop_at, self.give_up_at = start + seconds, start + seconds + settle
        await asyncio.gather(*(self._user(index) for index in range(self.users)))
        if self.waiting:
            await asyncio.wait(set(self.waiting))
        return start, self.stop_at

    async def _patiently(self, operation: Awaitable[None]) -> None:
        """Wait for an operation up to `PATIENCE` seconds; past that it goes on in the background."""
        task = asyncio.ensure_future(operation)
        self.waiting.add(task)
        task.add_done_callback(self.waiting.discard)
        await asyncio.wait({task}, timeout=PATIENCE)

    async def _user(self, index: int) -> None:
        rng = random.Random(self.seed * 7919 + index)
        mix = Mix(self.seed * 7919 + index)
        held: deque[str] = deque()
        tainted: deque[tuple[str, str]] = deque()
        count = 0
        names, weights = list(OPERATIONS), list(OPERATIONS.values())
        while time.monotonic() < self.stop_at:
            operation = rng.choices(names, weights)[0]
            count += 1
            if operation == "submit" or (operation == "remove" and not held):
                request = mix.draw().build(Ticket(f"c{self.seed}u{index}-{count}", f"u{index}", count))
                if self.clusters and rng.random() < 0.2:
                    request = msgspec.structs.replace(request, vcluster_id=rng.choice(self.clusters))
                await self._patiently(self._submit(rng, request, held))
            elif operation == "batch":
                size = rng.randint(2, 8)
                requests = [
                    mix.draw().build(Ticket(f"c{self.seed}u{index}-{count}-{place}", f"u{index}", count + place))
                    for place in range(size)
                ]
                await self._patiently(self._submit_batch(rng, requests, held))
            elif operation == "remove":
                await self._patiently(self._remove(rng, held.popleft()))
            elif operation == "taint":
                await self._patiently(self._taint(rng, tainted, count, index))
            elif operation == "vcluster":
                await self._patiently(self._vcluster(rng, index, count))
            else:
                await self._patiently(self._churn(rng))
            await asyncio.sleep(rng.uniform(0.02, 0.1))

    async def _retrying(self, kind: Kind, key: str, attempt: Callable[[Request], Awaitable[object]]) -> bool:
        """Send until answered (`attempt` raises `RejectedError` when refused, `ServiceFailedError` when a service
        answered that it failed on it) or the settling time ends; whether it was answered and accepted."""
        while time.monotonic() < self.give_up_at:
            request = self.ledger.sent(kind, key)
            try:
                await asyncio.wait_for(attempt(request), ATTEMPT_TIMEOUT + 1.0)
            except (RejectedError, ServiceFailedError) as refused:
                self.ledger.answered(request, str(refused))
                return False
            except Exception:  # a timeout, no responders, a connection being re-made: send it again
                await asyncio.sleep(RETRY_PAUSE)
                continue
            self.ledger.answered(request)
            return True
        return False

    async def _submit(self, rng: random.Random, request: ScheduleRequest, held: deque[str]) -> None:
        actor_id = request.actor_id
        client, key = self._client(rng), f"submit-{actor_id}"
        if await self._retrying(
            "submit", actor_id, lambda _sent: client.submit(request, timeout=ATTEMPT_TIMEOUT, command_id=key)
        ):
            held.append(actor_id)

    async def _submit_batch(self, rng: random.Random, requests: list[ScheduleRequest], held: deque[str]) -> None:
        """Send the requests as one batch, whole again while it goes unanswered (a submit sent again answers its
        decision and changes nothing); each recorded as a submit, a refused one with its reason."""
        client = self._client(rng)
        while time.monotonic() < self.give_up_at:
            sent = [self.ledger.sent("submit", work.actor_id) for work in requests]
            try:
                answers = await asyncio.wait_for(
                    client.submit_many(requests, timeout=ATTEMPT_TIMEOUT), ATTEMPT_TIMEOUT + 1.0
                )
            except (RejectedError, ServiceFailedError) as refused:  # the whole batch refused
                for record in sent:
                    self.ledger.answered(record, str(refused))
                return
            except Exception:  # a timeout, no responders, a connection being re-made: send it again
                await asyncio.sleep(RETRY_PAUSE)
                continue
            for work, record, answer in zip(requests, sent, answers, strict=True):
                if isinstance(answer, Rejected):
                    self.ledger.answered(record, answer.error)
                else:
                    self.ledger.answered(record)
                    held.append(work.actor_id)
            return

    async def _remove(self, rng: random.Random, actor_id: str) -> None:
        client, key = self._client(rng), f"remove-{actor_id}"
        await self._retrying("remove", actor_id, lambda _sent: client.remove_actor(actor_id, command_id=key))

    async def _taint(self, rng: random.Random, tainted: deque[tuple[str, str]], count: int, user: int) -> None:
        """Add a taint of a new key to a node (PreferNoSchedule: it steers, never blocks), or remove the oldest
        this user added."""
        client = self._client(rng)
        if tainted and rng.random() < 0.5:
            node_id, key = tainted.popleft()
            await self._retrying("untaint", f"{node_id}/{key}", lambda _sent: client.remove_taints(node_id, [key]))
        elif self.live_nodes:
            node_id, key = rng.choice(self.live_nodes), f"chaos-u{user}-{count}"
            taint = Taint(key, "x", "PreferNoSchedule")
            if await self._retrying("taint", f"{node_id}/{key}", lambda _sent: client.add_taints(node_id, [taint])):
                tainted.append((node_id, key))

    async def _vcluster(self, rng: random.Random, user: int, count: int) -> None:
        client = self._client(rng)
        if len(self.clusters) < 3 or rng.random() < 0.4:
            vc_id = f"vc{self.seed}u{user}-{count}"
            if await self._retrying(
                "vc_create", vc_id, lambda _sent: client.create_virtual_cluster(vc_id, CLUSTER_SPEC)
            ):
                self.clusters.append(vc_id)
        else:
            vc_id = self.clusters.pop(rng.randrange(len(self.clusters)))
            await self._retrying("vc_destroy", vc_id, lambda _sent: client.destroy_virtual_cluster(vc_id, force=True))

    async def _churn(self, rng: random.Random) -> None:
        """Take a node out and bring a new one in."""
        if len(self.live_nodes) > 1:
            node_id = self.live_nodes.pop(rng.randrange(len(self.live_nodes)))
            client = self._client(rng)
            await self._retrying("remove_node", node_id, lambda _sent: client.remove_node(node_id))
        await self._add_node(rng)

    async def _add_node(self, rng: random.Random) -> None:
        shape = next(self.shapes)
        client = self._client(rng)
        if await self._retrying("register", shape.node_id, lambda _sent: register_node(client, shape)):
            self.live_nodes.append(shape.node_id)


def _shapes(prefix: str) -> Iterator[NodeShape]:
    """Node shapes without end (a thousand at a time), each with a new id."""
    for batch in itertools.count():
        yield from node_shapes(1000, f"{prefix}b{batch}")
