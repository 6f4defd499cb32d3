"""Wiring of a decision worker: follow the log, decide batches of requests, have the leader's applier store them.

Each worker pulls requests from the same work queue the scheduler pulls alone without workers, decides a batch in
the core against its own view (a new actor of the root gets a node; anything else is left to the applier), and
proposes the batch to the leading scheduler's applier over `PROPOSALS`, keeping the requests unacked. Once the
applier has stored what it accepted and answered, the worker answers the clients and acks those requests; a refused
proposal is decided again after folding the log up to the applier's sequence, at most `RETRIES` times, and then left
to the applier. When no applier answers in time the batch is nak'ed and delivered again (the applier answers a
request it already decided as it did the first time).

A message carrying a `RequestBatch` is proposed as its requests, each with its place in the batch; the worker
answers it with one `BatchReply` and acks it once every one of its requests has its verdict.
"""

from __future__ import annotations

import asyncio
import logging
from typing import NamedTuple

import anyio
import nats.errors
from nats.aio.msg import Msg

from schemas import subjects as s
from schemas.commands import RequestBatch, SchedulerRequest, SubmitActor
from schemas.proposals import Proposal, Proposals, Verdict, Verdicts
from schemas.replies import BatchReply, Rejected, RequestReply
from services.core.errors import CodecError, RejectedError
from services.core.prng import SplitMix64, stable_hash
from services.core.state import Resources
from services.runtime import refusals
from services.runtime.codec import decode, encode
from services.runtime.service import Shell, service_shell
from services.runtime.settings import Settings
from services.runtime.views import FoldedCluster
from services.runtime.work_queue import (
    REQUESTS_AT_ONCE,
    answer_and_ack,
    durable_request,
    inbox_of,
    pull,
    request_consumer,
    request_sequence,
)

log = logging.getLogger("corral.decider")

RETRIES = 2
"""Times a refused proposal is decided again by the worker before the applier decides it itself."""
NO_APPLIER_PAUSE_S = 0.1
"""How long to wait before proposing again while no scheduler leads (an election under way)."""


class Answers:
    """The replies to the requests of one batch message, in its order, as their verdicts come."""

    def __init__(self, msg: Msg, count: int) -> None:
        self.msg = msg
        self.replies: list[RequestReply | None] = [None] * count
        self.missing = count

    def add(self, place: int, reply: RequestReply) -> list[RequestReply] | None:
        """Keep the reply of the request at `place` (from 1); every reply, once each request has one."""
        if self.replies[place - 1] is None:
            self.missing -= 1
        self.replies[place - 1] = reply
        return None if self.missing else [reply for reply in self.replies if reply is not None]


class Item(NamedTuple):
    """One request waiting for its verdict: its message, and its place in the message's batch (0: alone)."""

    msg: Msg
    request: SchedulerRequest
    place: int = 0
    size: int = 0
    """The request's size in bytes."""
    answers: Answers | None = None
    """The replies of its batch (None: the request is its message alone)."""


Waiting = list[Item]


async def main(settings: Settings) -> None:
    """Follow the log into a view of our own; decide and propose batch after batch."""
    view = FoldedCluster(settings.seed, settings.rare_resources)
    async with service_shell(settings, "decider", view) as shell:
        await shell.bus.ensure_streams((s.REQUESTS_STREAM,))
        await refusals.declare(shell.bus)  # kept before a refused request is acked
        async with anyio.create_task_group() as group:
            group.start_soon(shell.follower.run)
            group.start_soon(shell.follower.watch_log)
            await shell.follower.caught_up(patient=True)  # a bus outage at start-up is waited out, not an exit
            await Worker(shell, view, settings).run()


class Worker:
    """Decides batches of requests on its view and proposes them; its generator is its own (seeded by instance)."""

    def __init__(self, shell: Shell, view: FoldedCluster, settings: Settings) -> None:
        self.shell, self.view, self.settings = shell, view, settings
        self.prng = SplitMix64(stable_hash(settings.seed, settings.instance))

    async def run(self) -> None:
        """Pull, decide and propose, forever."""
        requests = await pull(self.shell.bus, s.REQUESTS_SUBJECTS, s.REQUESTS_STREAM, request_consumer(self.settings))
        self.shell.subscriptions.append(requests)
        while True:
            try:
                batch = await requests.fetch(self.settings.request_batch, timeout=0.5)
            except (TimeoutError, nats.errors.TimeoutError):
                continue
            for part in by_messages(await self._readable(batch), REQUESTS_AT_ONCE):
                await self.decide(part)

    async def _readable(self, batch: list[Msg]) -> Waiting:
        """The batch's requests (a batch message's each in its place); an unreadable message is set aside in dead
        letters, answered and never delivered again."""
        readable: Waiting = []
        bus = self.shell.bus
        for msg in batch:
            try:
                request = durable_request(msg, bus.settings.max_message_bytes)
            except CodecError as error:
                log.warning("request on %s rejected: %s", msg.subject, error)
                await bus.dead_letter("scheduler", msg.data, str(error), msg.subject, request=request_sequence(msg))
                await answer_and_ack(bus, self.shell.pager.fit, msg, Rejected(str(error)), poison=True)
                continue
            if isinstance(request, RequestBatch):
                answers = Answers(msg, len(request.requests))
                readable += [
                    Item(msg, item, place, len(encode(item)), answers)
                    for place, item in enumerate(request.requests, start=1)
                ]
            else:
                readable.append(Item(msg, request, size=len(msg.data)))
        return readable

    async def decide(self, waiting: Waiting) -> None:
        """Propose the requests until each is answered (the last time leaving them all to the applier)."""
        for attempt in range(RETRIES + 1):
            if not waiting:
                return
            verdicts = await self._propose(waiting, choose=attempt < RETRIES)
            if verdicts is None:
                for msg in {id(item.msg): item.msg for item in waiting}.values():  # a batch message once
                    await msg.nak()
                return
            refused: Waiting = []
            for item, verdict in zip(waiting, verdicts.verdicts, strict=True):
                if item.answers is not None:
                    if verdict.reply is None:
                        refused.append(item)
                    else:
                        await self._collect(item.answers, item.place, verdict.reply)
                elif verdict.reply is None and not verdict.sent:
                    refused.append(item)
                else:
                    await answer_and_ack(
                        self.shell.bus, self.shell.pager.fit, item.msg, verdict.reply, poison=verdict.poison
                    )
            waiting = refused
            if waiting:
                try:
                    await self.shell.follower.wait_for(verdicts.sequence)
                except TimeoutError:
                    log.warning("the view did not fold up to %d in time; proposing again", verdicts.sequence)

    async def _collect(self, answers: Answers, place: int, reply: RequestReply) -> None:
        """Keep a batch's reply; once all its requests have one, answer the batch and ack it (a poison request of it
        is answered as the scheduler failing, and the others are decided: the message is acked, not terminated)."""
        replies = answers.add(place, reply)
        if replies is not None:
            await answer_and_ack(self.shell.bus, self.shell.pager.fit, answers.msg, BatchReply(replies), poison=False)

    async def _propose(self, waiting: Waiting, *, choose: bool) -> Verdicts | None:
        """Decide the requests (with `choose`, else leave them to the applier) and have the applier store them;
        None when no applier answered in time. Once a request of a batch is refused, its batch's later requests in
        later parts are not proposed (refused here): they are decided after it, in their order."""
        taken: dict[str, Resources] = {}
        proposals = [self._proposal(item, taken if choose else None) for item in waiting]
        limit = max(1, self.shell.bus.nc.max_payload // 2)
        verdicts: list[Verdict] = []
        sequence = 0
        held: set[int] = set()  # the sequences of the batch messages with a request refused
        for part in _parts(proposals, [item.size for item in waiting], limit):
            withheld = [bool(proposal.place) and proposal.request_sequence in held for proposal in part]
            sent = [proposal for proposal, out in zip(part, withheld, strict=True) if not out]
            answer = await self._ask(Proposals(self.settings.instance, self.view.sequence, sent)) if sent else None
            if sent and (answer is None or len(answer.verdicts) != len(sent)):
                return None
            answered = iter(answer.verdicts if answer is not None else [])
            for proposal, out in zip(part, withheld, strict=True):
                verdict = Verdict() if out else next(answered)
                if proposal.place and verdict.reply is None:
                    held.add(proposal.request_sequence)
                verdicts.append(verdict)
            sequence = max(sequence, answer.sequence if answer is not None else 0)
        return Verdicts(sequence, verdicts)

    def _proposal(self, item: Item, taken: dict[str, Resources] | None) -> Proposal:
        msg, request = item.msg, item.request
        node_id, drawn = "", -1
        if taken is not None and isinstance(request, SubmitActor):
            drawn = self.prng.state
            try:
                node_id = self.view.cluster.propose(request.request, self.prng, taken) or ""
            except RejectedError:
                pass  # a request the core refuses: the applier answers it with the reason
            except Exception:  # a bug must not stop the worker: the applier decides (and sets aside) the request
                log.exception("proposing for request on %s failed", msg.subject)
        inbox = "" if item.place else inbox_of(msg)  # a batch is answered by the worker alone
        return Proposal(request, request_sequence(msg), inbox, node_id, drawn, item.place)

    async def _ask(self, proposals: Proposals) -> Verdicts | None:
        """The applier's verdicts (waiting out an election with no leader), or None after half the ack wait."""
        nc = self.shell.bus.nc
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.request_ack_wait / 2
        data = encode(proposals)
        while (left := deadline - loop.time()) > 0:
            try:
                reply = await nc.request(s.PROPOSALS, data, timeout=left)
            except nats.errors.NoRespondersError:
                await asyncio.sleep(min(NO_APPLIER_PAUSE_S, left))
                continue
            except (TimeoutError, nats.errors.TimeoutError):
                break
            try:
                verdicts: Verdicts = decode(reply.data, Verdicts, max_bytes=nc.max_payload)
            except CodecError as error:
                log.warning("the applier's answer is unreadable: %s", error)
                break
            return verdicts
        log.warning("no scheduler answered %d proposals in time: delivered again", len(proposals.proposals))
        return None


def by_messages(waiting: Waiting, most: int) -> list[Waiting]:
    """`waiting` in consecutive parts of at most `most` requests, a message's requests never split between two (a
    message of more is a part alone)."""
    parts: list[Waiting] = []
    for item in waiting:
        starts_message = not parts or item.msg is not parts[-1][-1].msg
        if starts_message and (not parts or len(parts[-1]) + _requests_in(item) > most):
            parts.append([])
        parts[-1].append(item)
    return parts


def _requests_in(item: Item) -> int:
    """How many requests the message of `item` holds."""
    return len(item.answers.replies) if item.answers is not None else 1


def _parts(proposals: list[Proposal], sizes: list[int], limit: int) -> list[list[Proposal]]:
    """The proposals in consecutive parts whose requests add up to at most `limit` bytes (or one request each)."""
    parts: list[list[Proposal]] = [[]]
    used = 0
    for proposal, size in zip(proposals, sizes, strict=True):
        if parts[-1] and used + size > limit:
            parts.append([])
            used = 0
        parts[-1].append(proposal)
        used += size
    return parts
