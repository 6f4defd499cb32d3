"""The async client: the core `Cluster`'s surface, spoken over the bus."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js import api

from schemas import Pending, Placed, PlacementGroupRequest, ScheduleRequest, Taint, TaintEffect, VirtualCluster
from schemas import subjects as s
from schemas.commands import (
    AddTaints,
    CreatePlacementGroup,
    Heartbeat,
    RegisterNode,
    RemoveActor,
    RemoveNode,
    RemovePlacementGroup,
    RemoveTaints,
    ReportActorFailed,
    RequestBatch,
    SchedulerRequest,
    SetLabels,
    SubmitActor,
)
from schemas.queries import (
    ActorInfo,
    ActorsQuery,
    ActorsReply,
    AutoscalerStatusQuery,
    AutoscalerStatusReply,
    AutoscalerWhyQuery,
    AutoscalerWhyReply,
    DeadLetter,
    DecisionQuery,
    HealthQuery,
    HealthReply,
    NodeInfo,
    NodesQuery,
    NodesReply,
    StatusQuery,
    StatusReply,
    TaintsQuery,
    TaintsReply,
)
from schemas.replies import Accepted, Rejected
from services.client.batches import BATCH_HEADROOM, batch_parts
from services.client.deadlines import check, deadline_in
from services.client.history import HistoryCalls
from services.client.job import Job
from services.client.vclusters import VirtualClusterCalls
from services.client.work_events import WorkEvents
from services.core.errors import UnavailableError
from services.runtime.codec import encode
from services.runtime.log_reader import header_number, header_text

log = logging.getLogger("corral.client")

Decision = Placed | Pending
WorkKind = Literal["actor", "placement_group"]
"""What a decision is about."""


class Client(VirtualClusterCalls, HistoryCalls):
    """Connect with `async with Client(url)`; the URL defaults to `CORRAL_NATS_URL` (and `redis_url`, where the
    history reads the scheduler's snapshots, to `CORRAL_REDIS_URL`)."""

    def __init__(
        self,
        url: str | None = None,
        *,
        name: str = "corral-client",
        timeout: float = 5.0,
        redis_url: str | None = None,
    ) -> None:
        super().__init__(url, name=name, timeout=timeout, redis_url=redis_url)
        self._nodes: dict[str, RegisterNode] = {}
        self._beating: dict[str, tuple[str, bytes]] = {}
        """The nodes this client heartbeats, by the token of their reply subject: each node's id and heartbeat."""
        self._beater: asyncio.Task[None] | None = None

    async def close(self) -> None:
        """Stop heartbeats and close the connection."""
        if self._beater is not None:
            self._beater.cancel()
            self._beater = None
        self._beating.clear()
        await super().close()

    async def _reconnected(self) -> None:
        await self._register_again()

    # nodes

    async def register_node(
        self,
        node_id: str,
        resources: dict[str, float],
        labels: dict[str, str] | None = None,
        taints: dict[str, str] | list[Taint] | None = None,
        *,
        address: str = "",
        heartbeat: bool = True,
        **defaults: str | None,
    ) -> Accepted:
        """Register a node (defaults: hostname, zone, region, ...); heartbeats go out while connected."""
        taint_list = [Taint(k, v) for k, v in taints.items()] if isinstance(taints, dict) else list(taints or [])
        given: dict[str, Any] = {key: value for key, value in defaults.items() if value is not None}
        command = RegisterNode(
            node_id=node_id, resources=resources, labels=labels or {}, address=address, taints=taint_list, **given
        )
        accepted = await self._command(s.REGISTER_NODE, command)
        self._nodes[node_id] = command
        if heartbeat and s.token(node_id) not in self._beating:
            self._beating[s.token(node_id)] = (node_id, encode(Heartbeat(node_id)))
            if self._beater is None:
                self._beater = asyncio.create_task(self._beat())
        return accepted

    async def _beat(self) -> None:
        """Heartbeat every node this client registered, together, every interval while connected (one task, and one
        burst the server and `labels` read in a few reads, however many nodes a simulator holds). `labels` answers the
        heartbeat of a node its log does not hold (the log was replaced, or the node was declared dead) on the node's
        own reply subject, and that node is then registered again."""
        inbox = self.bus.nc.new_inbox()

        async def unknown(msg: Msg) -> None:
            beating = self._beating.get(msg.subject.rpartition(".")[2])
            if beating is not None:
                await self._register_unknown(beating[0])

        answers = await self.bus.nc.subscribe(f"{inbox}.*", cb=unknown)
        try:
            while True:
                for reply_token, (node_id, beat) in list(self._beating.items()):
                    with contextlib.suppress(nats.errors.Error):
                        await self.bus.nc.publish(s.heartbeat_subject(node_id), beat, reply=f"{inbox}.{reply_token}")
                await asyncio.sleep(self.settings.heartbeat_interval)
        finally:
            with contextlib.suppress(nats.errors.Error):
                await answers.unsubscribe()

    async def _register_unknown(self, node_id: str) -> None:
        command = self._nodes.get(node_id)
        if command is None:
            return
        try:
            await self._command(s.REGISTER_NODE, command)
        except Exception as error:
            log.warning("node %s is unknown to the mesh and not registered again yet: %s", node_id, error)
        else:
            log.info("node %s was unknown to the mesh (a new event log, or declared dead): registered again", node_id)

    async def _register_again(self) -> None:
        """After a reconnect, register every node again: the same id and resources resume it."""
        for node_id, command in list(self._nodes.items()):
            try:
                await self._command(s.REGISTER_NODE, command)
            except Exception as error:
                log.warning("node %s not registered again after reconnect: %s", node_id, error)

    async def set_labels(self, node_id: str, labels: dict[str, str]) -> Accepted:
        """Replace a node's user labels."""
        return await self._command(s.SET_LABELS, SetLabels(node_id=node_id, labels=labels))

    async def edit_labels(
        self, node_id: str, labels: dict[str, str], remove: list[str] | None = None, *, overwrite: bool = False
    ) -> Accepted:
        """Set these user labels and remove the keys of `remove`, in one change (as `kubectl label`): a key whose
        value would change is refused unless `overwrite`."""
        command = SetLabels(node_id=node_id, labels=labels, merge=True, remove=list(remove or []), overwrite=overwrite)
        return await self._command(s.SET_LABELS, command)

    async def add_taints(
        self, node_id: str, taints: dict[str, str] | list[Taint], *, node_address: str = ""
    ) -> Accepted:
        """Append taints to a node (by id, or by address with `node_id=""`)."""
        taint_list = [Taint(k, v) for k, v in taints.items()] if isinstance(taints, dict) else list(taints)
        command = AddTaints(taints=taint_list, node_id=node_id, node_address=node_address)
        return await self._command(s.ADD_TAINTS, command)

    async def remove_taints(
        self,
        node_id: str,
        keys: list[str],
        *,
        effects: dict[str, list[TaintEffect]] | None = None,
        node_address: str = "",
    ) -> Accepted:
        """Delete the taints with these keys, and those whose key and effect `effects` names (key -> effects)."""
        command = RemoveTaints(keys=list(keys), effects=dict(effects or {}), node_id=node_id, node_address=node_address)
        return await self._command(s.REMOVE_TAINTS, command)

    async def remove_node(self, node_id: str) -> Accepted:
        """Take a node out now; its actors fail and restart elsewhere when they may."""
        self._beating.pop(s.token(node_id), None)
        self._nodes.pop(node_id, None)
        return await self._command(s.REMOVE_NODE, RemoveNode(node_id=node_id))

    # work

    async def submit(self, request: ScheduleRequest, timeout: float | None = None, *, command_id: str = "") -> Decision:
        """Schedule an actor or task: `Placed`, or `Pending` with the reasons (a live id returns its decision).

        `command_id` is an idempotency key: sent again with the same key (say, after a timeout in an outage), the
        request is stored once and the answer is the decision its first sending led to; another request under a key
        used within the duplicate window is a `ConflictError` naming the key and the fields that differ.
        """
        reply = await self._durable(s.SCHEDULE, SubmitActor(request=request, command_id=command_id), timeout)
        assert isinstance(reply, Placed | Pending), reply
        return reply

    async def create_placement_group(
        self, request: PlacementGroupRequest, timeout: float | None = None, *, command_id: str = ""
    ) -> Decision:
        """Reserve a placement group, all bundles or none (`command_id`: an idempotency key, as for `submit`)."""
        command = CreatePlacementGroup(request=request, command_id=command_id)
        reply = await self._durable(s.CREATE_PLACEMENT_GROUP, command, timeout)
        assert isinstance(reply, Placed | Pending), reply
        return reply

    async def remove_actor(self, actor_id: str, *, command_id: str = "") -> Accepted:
        """An actor or task finished: free its resources (`command_id`: an idempotency key, as for `submit`)."""
        reply = await self._durable(s.REMOVE_ACTOR, RemoveActor(actor_id=actor_id, command_id=command_id), None)
        assert isinstance(reply, Accepted), reply
        return reply

    async def send_batch(
        self, requests: Sequence[SchedulerRequest], timeout: float | None = None
    ) -> list[Placed | Pending | Accepted | Rejected]:
        """Send many durable requests at once: one message and one reply for up to `MAX_BATCH` of them (a longer
        list, or one over the services' message size, goes as consecutive batches). They are decided in order, each
        as it would be alone, and the answers come back in that order once all are durable: a `Rejected` for a
        request refused is in the list, not raised. A request in a batch carries no `command_id`; a resent submit
        whose actor id is live answers its decision again and changes nothing."""
        limit = min(self.settings.max_message_bytes, self.bus.nc.max_payload) - BATCH_HEADROOM
        replies: list[Placed | Pending | Accepted | Rejected] = []
        for part in batch_parts(requests, limit):
            replies += await self._durable_batch(RequestBatch(requests=part), timeout)
        return replies

    async def submit_many(
        self, requests: Sequence[ScheduleRequest], timeout: float | None = None
    ) -> list[Placed | Pending | Rejected]:
        """Schedule many actors or tasks at once (`send_batch`): a `Placed`, `Pending` or `Rejected` for each, in
        order."""
        replies = await self.send_batch([SubmitActor(request=request) for request in requests], timeout)
        decisions = [reply for reply in replies if isinstance(reply, Placed | Pending | Rejected)]
        assert len(decisions) == len(replies), replies
        return decisions

    async def remove_many(self, actor_ids: Sequence[str], timeout: float | None = None) -> list[Accepted | Rejected]:
        """Remove many actors or tasks at once (`send_batch`): an `Accepted` or `Rejected` for each, in order."""
        replies = await self.send_batch([RemoveActor(actor_id=actor_id) for actor_id in actor_ids], timeout)
        answers = [reply for reply in replies if isinstance(reply, Accepted | Rejected)]
        assert len(answers) == len(replies), replies
        return answers

    async def report_actor_failed(self, actor_id: str) -> Accepted:
        """A running actor failed: it restarts while it has restarts left."""
        reply = await self._durable(s.REPORT_ACTOR_FAILED, ReportActorFailed(actor_id=actor_id), None)
        assert isinstance(reply, Accepted), reply
        return reply

    async def remove_placement_group(self, pg_id: str) -> Accepted:
        """Release a placement group."""
        reply = await self._durable(s.REMOVE_PLACEMENT_GROUP, RemovePlacementGroup(pg_id=pg_id), None)
        assert isinstance(reply, Accepted), reply
        return reply

    async def decision(self, work_id: str, kind: WorkKind = "actor") -> Decision:
        """The current decision for an actor (or placement group)."""
        answer: Decision = await self._ask(s.DECISION_QUERY, DecisionQuery(work_id, kind), Placed | Pending)
        return answer

    async def why(self, actor_id: str, at: int | datetime | str | None = None) -> Decision:
        """Why an actor waits (its `Pending`, with the nodes behind each reason), or where it runs; with `at` (a log
        sequence or a time), as it was then (`why_at`)."""
        if at is not None:
            return await self.why_at(actor_id, at)
        return await self.decision(actor_id)

    async def wait_placed(self, actor_id: str, timeout: float = 5.0) -> Placed:
        """Wait until the actor is placed; `TimeoutError` if it is still pending after `timeout` seconds."""
        events = await WorkEvents.open(self.bus.nc, s.ACTOR, actor_id)
        deadline = deadline_in(timeout)
        try:
            async with asyncio.timeout_at(deadline):
                while True:
                    check(deadline)
                    decision = await self.decision(actor_id)
                    if isinstance(decision, Placed):
                        return decision
                    await events.next(1.0)
        except TimeoutError:
            raise TimeoutError(f"actor {actor_id!r} not placed within {timeout}s") from None
        finally:
            await events.close()

    # introspection

    async def health(self, service: str) -> HealthReply:
        """How a process of `service` stands: its view's sequence, whether its snapshots are saved."""
        answer: HealthReply = await self._ask(s.health_subject(service), HealthQuery(), HealthReply)
        return answer

    async def ready(self) -> None:
        """Return when the scheduler, labels, taints and vclusters services answer; `UnavailableError` if not."""
        await self.status(limit=1)
        await self.nodes(limit=1)
        await self.taints(limit=1)
        await self.virtual_clusters(limit=1)

    async def wait_ready(self, timeout: float = 30.0) -> None:
        """Poll `ready()` until every service answers; `UnavailableError` after `timeout` seconds."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                return await self.ready()
            except UnavailableError:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.05)

    # Lists come page by page, each page within the bus's payload limit, all of one listing (one point in the
    # log); they return whole. `limit` caps each list (of a status: nodes, actors, groups and pending alike).

    async def status(self, limit: int | None = None) -> StatusReply:
        """Nodes, actors, placement groups and pending work, as the scheduler sees them."""
        answer: StatusReply = await self._list(s.STATUS_QUERY, StatusQuery(), StatusReply, limit)
        return answer

    async def placements(self, vcluster_id: str | None = None, limit: int | None = None) -> dict[str, str]:
        """Actor id -> node id for every placed actor (with `vcluster_id`: that cluster's, on virtual nodes)."""
        if vcluster_id:
            return (await self.virtual_cluster_work(vcluster_id, limit)).placements
        status = await self.status(limit)
        return {a.actor_id: a.node_id for a in status.actors if a.status == "placed" and a.node_id is not None}

    async def placement_groups(self, vcluster_id: str | None = None, limit: int | None = None) -> dict[str, list[str]]:
        """Placement group id -> node per bundle, for every placed group (with `vcluster_id`: that cluster's)."""
        if vcluster_id:
            return (await self.virtual_cluster_work(vcluster_id, limit)).placement_groups
        return (await self.status(limit)).placement_groups

    async def pending(self, vcluster_id: str | None = None, limit: int | None = None) -> list[Pending]:
        """Waiting actors and placement groups, in queue order, with reasons (with `vcluster_id`: that cluster's)."""
        if vcluster_id:
            return (await self.virtual_cluster_work(vcluster_id, limit)).pending
        return (await self.status(limit)).pending

    async def nodes(
        self, selector: dict[str, Any] | None = None, vcluster_id: str | None = None, limit: int | None = None
    ) -> list[NodeInfo]:
        """Live nodes whose labels match `selector` (with `vcluster_id`: that cluster's virtual nodes)."""
        if vcluster_id:
            return await self._scoped_nodes(vcluster_id, selector or {}, limit)
        answer: NodesReply = await self._list(s.NODES_QUERY, NodesQuery(selector or {}), NodesReply, limit)
        return answer.nodes

    async def actors(
        self, labels: dict[str, str] | None = None, namespace: str = "default", limit: int | None = None
    ) -> list[ActorInfo]:
        """Placed actors carrying these labels (the actor-label index)."""
        answer: ActorsReply = await self._list(s.ACTORS_QUERY, ActorsQuery(namespace, labels or {}), ActorsReply, limit)
        return answer.actors

    async def taints(self, node_id: str = "", limit: int | None = None) -> dict[str, list[Taint]]:
        """Taints per node."""
        answer: TaintsReply = await self._list(s.TAINTS_QUERY, TaintsQuery(node_id), TaintsReply, limit)
        return answer.taints

    async def autoscaler_status(self) -> AutoscalerStatusReply:
        """The autoscaler's demand groups, node types (min, max, running, launching, idle) and recent launches and
        terminations (`UnavailableError` when no autoscaler runs)."""
        answer: AutoscalerStatusReply = await self._ask(
            s.AUTOSCALER_STATUS_QUERY, AutoscalerStatusQuery(), AutoscalerStatusReply
        )
        return answer

    async def autoscaler_why(self, work_id: str, kind: WorkKind = "actor") -> AutoscalerWhyReply:
        """What the autoscaler does about a pending actor (or placement group): launching nodes for it, or why no
        node type can host it (`UnavailableError` when no autoscaler runs)."""
        query = AutoscalerWhyQuery(work_id, kind)
        answer: AutoscalerWhyReply = await self._ask(s.AUTOSCALER_WHY_QUERY, query, AutoscalerWhyReply)
        return answer

    async def wait_autoscaler(self, timeout: float = 30.0) -> AutoscalerStatusReply:
        """Poll until the leading autoscaler answers; `UnavailableError` after `timeout` seconds."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                return await self.autoscaler_status()
            except UnavailableError:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.05)

    async def dead_letters(self, service: str = "", limit: int = 100) -> list[DeadLetter]:
        """The newest `limit` messages the services set aside (of `service` only, when given), oldest first."""
        newest = (await self.bus.js.stream_info(s.DEAD_LETTERS_STREAM)).state
        found: list[DeadLetter] = []
        sequence = newest.last_seq or 0
        while sequence >= max(1, newest.first_seq or 1) and len(found) < limit:
            with contextlib.suppress(nats.js.errors.NotFoundError):  # removed by age meanwhile
                letter = dead_letter(await self.bus.js.get_msg(s.DEAD_LETTERS_STREAM, sequence))
                if not service or letter.service == service:
                    found.append(letter)
            sequence -= 1
        return found[::-1]

    # jobs

    def job(
        self,
        virtual_cluster: VirtualCluster | None = None,
        vc_id: str | None = None,
        parent: str | None = None,
        priority: int = 0,
        timeout: float = 5.0,
    ) -> Job:
        """`async with client.job(virtual_cluster=VirtualCluster(...)) as job:` runs a job in its own cluster.

        The cluster (id `vc_id`, generated when None) is created on entry under `parent`, every request made
        through `job` is scoped to it, and it is destroyed with `force=True` on exit. Without a spec the cluster
        has no minimum and no maximum: it borrows whatever its parent has free.
        """
        return Job(self, virtual_cluster or VirtualCluster(), vc_id, parent, priority, timeout)


def dead_letter(msg: api.RawStreamMsg) -> DeadLetter:
    """A message of the dead-letters stream, as the client reports it."""
    headers = msg.headers or {}
    return DeadLetter(
        time=msg.time.isoformat(timespec="seconds") if msg.time else "",
        service="".join((msg.subject or "").split(".")[2:3]),  # corral.dlq.<service>[.events]
        subject=header_text(headers, s.DEAD_LETTER_SUBJECT),
        sequence=header_number(headers, s.DEAD_LETTER_SEQUENCE),
        reason=header_text(headers, s.DEAD_LETTER_REASON),
        data=(msg.data or b"")[:1000].decode(errors="replace"),
    )
