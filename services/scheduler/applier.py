"""The leading scheduler's applier (with `CORRAL_DECISION_WORKERS` above 0): the one serial step of allocation.

Decision workers decide batches of requests against their own views and propose them here. The applier checks
each proposal against its view, the authoritative one (`handlers.handle_proposal`: the node live, its room, the
hard rules on that node only; a live id answered with its decision), appends what it accepts exactly as the
scheduler appends its own decisions, checks it is still the elected leader, and only then answers each worker.
The requests of a batch message (`Proposal.place` from 1) are decided in their order: once one is refused, the
later ones of its batch in the same proposals are refused undecided, and proposed again after it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Protocol

import msgspec
import nats.errors
from nats.aio.msg import Msg

from schemas import Pending
from schemas import subjects as s
from schemas.commands import SchedulerRequest
from schemas.proposals import Proposal, Proposals, Verdict, Verdicts
from schemas.replies import Rejected, RequestReply
from services.core.errors import CodecError
from services.runtime import refusals
from services.runtime.codec import MAX_DEPTH, decode, encode
from services.runtime.nats_private import pending_queue
from services.runtime.pages import HEADROOM, trimmed_pending
from services.runtime.runner import EXIT_LEASE_LOST, ServiceExit
from services.runtime.service import Shell
from services.runtime.work_queue import send_reply
from services.scheduler import measure
from services.scheduler.handlers import handle_proposal
from services.scheduler.view import SchedulerView

log = logging.getLogger("corral.scheduler.applier")

DEPOSED = "a newer scheduler was elected: this batch is left unanswered for it"

REMEMBERED = 100_000
"""Verdicts kept by request sequence and place: a request delivered again (its worker gave up waiting) gets the
same one."""
NESTING = 4
"""How much deeper a request lies inside `Proposals` than alone (a request within the limit is never refused here)."""
BATCHES_AT_ONCE = 64
"""Proposal batches (from any workers) applied together: one append and one election check for all of them."""
PROPOSALS_AT_ONCE = 4_096
"""At most this many proposals a round (a bigger batch is a round alone, decided this many at a time): between rounds
the event loop renews the lease and reads the log, so a flood of proposals delays the next batches rather than
stalling the leader."""

Guard = Callable[
    [str, Callable[[], bytes], Callable[[], RequestReply | None], Callable[[], int]],
    Awaitable[tuple[RequestReply | None, bool]],
]
"""Runs a decision; a request the scheduler fails on is set aside and answered as the scheduler failing (poison)."""


class Appender(Protocol):
    """The scheduler's writer, as the applier uses it."""

    lock: asyncio.Lock
    confirmed: int

    async def flush(self) -> int:
        """Append what was decided; the sequence of the first event (0 if none)."""
        ...


class Applier:
    """Checks and appends the workers' proposals, batch after batch, under the writer's lock."""

    def __init__(
        self,
        shell: Shell,
        view: SchedulerView,
        writer: Appender,
        still_elected: Callable[[int], Awaitable[None]],
        guarded: Guard,
    ) -> None:
        self.shell, self.view, self.writer = shell, view, writer
        self.still_elected, self.guarded = still_elected, guarded
        self.answered: OrderedDict[tuple[int, int], tuple[SchedulerRequest, Verdict]] = OrderedDict()
        """(Request sequence, place) -> the request and its verdict (a proposal naming them with another request is
        not answered from here: a forged one must not answer the real request)."""

    async def run(self) -> None:
        """Take the proposal batches that wait, apply them together, answer each; forever."""
        sub = await self.shell.bus.nc.subscribe(s.PROPOSALS, queue=self.shell.name, pending_msgs_limit=100_000)
        self.shell.subscriptions.append(sub)
        queue = pending_queue(sub)
        while True:
            try:
                msgs = [await (queue.get(60.0) if queue is not None else sub.next_msg(timeout=60.0))]
            except (TimeoutError, nats.errors.TimeoutError):
                continue  # no worker proposed for a minute
            while queue is not None and not queue.empty() and len(msgs) < BATCHES_AT_ONCE:
                msgs.append(queue.get_nowait())
            async for batches in rounds(self._readable(msgs)):
                await self.apply(batches)
                await asyncio.sleep(0)  # the lease, the log and the answers run between rounds

    async def _readable(self, msgs: list[Msg]) -> AsyncIterator[tuple[Msg, Proposals]]:
        """The batches of `msgs` that decode, one at a time with a turn of the event loop after each (64 batches of
        1 MB take it most of a second to decode); each of the others is logged and left unanswered."""
        for msg in msgs:
            try:
                batch = decode(
                    msg.data, Proposals, max_bytes=self.shell.bus.nc.max_payload, max_depth=MAX_DEPTH + NESTING
                )
            except CodecError as error:
                log.warning("proposals from %s refused: %s", msg.reply[:200], error)
                continue
            finally:
                await asyncio.sleep(0)
            yield msg, batch

    async def apply(self, batches: list[tuple[Msg, Proposals]]) -> None:
        """Decide every proposal of `batches`, append, and answer once the events are stored and still count.

        A batch over `PROPOSALS_AT_ONCE` proposals is decided and appended that many at a time, with a turn of the
        event loop between: one big batch must not stall the lease's renewal either."""
        proposals = [
            (proposal, batch.folded, index)
            for index, (_msg, batch) in enumerate(batches)
            for proposal in batch.proposals
        ]
        verdicts: list[Verdict] = []
        held: set[tuple[int, int]] = set()
        for start in range(0, len(proposals), PROPOSALS_AT_ONCE):
            if start:
                await asyncio.sleep(0)
            verdicts += await self._stored_verdicts(proposals[start : start + PROPOSALS_AT_ONCE], held)
        sequence = max(self.writer.confirmed, self.view.sequence)
        ends = list(itertools.accumulate(len(batch.proposals) for _msg, batch in batches))
        decided = [verdicts[end - len(batch.proposals) : end] for (_msg, batch), end in zip(batches, ends, strict=True)]
        limit = self.shell.bus.nc.max_payload
        for (msg, batch), batch_verdicts in zip(batches, decided, strict=True):
            for_workers = [
                await self._worker_verdict(p, v) for p, v in zip(batch.proposals, batch_verdicts, strict=True)
            ]
            answer = encode(Verdicts(sequence, for_workers))
            if len(answer) > limit:
                # every reply of a request alone sent from here instead: a verdict marked sent is shorter than any
                # proposal, so this fits (but for the replies of batches' requests, which only the worker answers)
                direct = [
                    await self._worker_verdict(p, v, direct=True)
                    for p, v in zip(batch.proposals, for_workers, strict=True)
                ]
                answer = encode(Verdicts(sequence, direct))
                if len(answer) > limit:
                    answer = fitted(batch.proposals, Verdicts(sequence, direct), limit)
            if msg.reply:  # never to a Corral or JetStream subject a forger named as the reply subject
                await send_reply(self.shell.bus, s.PROPOSALS, msg.reply, answer)

    async def _stored_verdicts(
        self, proposals: list[tuple[Proposal, int, int]], held: set[tuple[int, int]]
    ) -> list[Verdict]:
        """Decide `proposals` (each with the sequence its worker had folded and the index of its batch) and append
        what they decided; return once the events are stored and still count. A request of a batch message whose
        earlier request was refused in the same batch (`held`: batch index, request sequence) is refused undecided.
        """
        async with self.writer.lock:
            if self.view.deposed():
                raise ServiceExit(EXIT_LEASE_LOST, DEPOSED)
            verdicts: list[Verdict] = []
            spent: dict[int, float] = {}
            for proposal, folded, index in proposals:
                batch = (index, proposal.request_sequence)
                if proposal.place and batch in held:
                    verdicts.append(Verdict())
                    continue
                began = time.perf_counter()
                verdict = await self._decide(proposal, folded)
                spent[index] = spent.get(index, 0.0) + time.perf_counter() - began
                if proposal.place and verdict.reply is None:
                    held.add(batch)
                verdicts.append(verdict)
            for seconds in spent.values():  # one sample per batch of proposals, as the scheduler takes one a message
                measure.timed(seconds, 0)
            appended_from = await self.writer.flush()
        await self.still_elected(appended_from)
        return verdicts

    async def _decide(self, proposal: Proposal, folded: int) -> Verdict:
        known = self.answered.get((proposal.request_sequence, proposal.place))
        if known is not None and known[0] == proposal.request:
            return known[1]
        reply, poison = await self.guarded(
            s.PROPOSALS,
            lambda: encode(proposal.request),
            lambda: handle_proposal(self.view, proposal, folded),
            lambda: 0,  # no key: a proposal is decided once (`answered`), and a forged one's sequence is no request's
        )
        verdict = Verdict(reply, poison=poison)
        if reply is not None:  # remembered at once: a batch that is not stored ends this process, and its memory
            measure.counted(proposal.request, reply)
            self._remember(proposal, verdict)
        return verdict

    async def _worker_verdict(self, proposal: Proposal, verdict: Verdict, *, direct: bool = False) -> Verdict:
        """The verdict a worker gets, now that its events are stored: a long reply (a pending explanation), or any
        reply when `direct` (the batch's answer would pass the bus's payload limit), is sent to the client's inbox
        from here, and remembered as sent. A refusal sent from here is kept first (`refusals`; the worker, which
        holds the request's message, gets no reply to keep): under the request's sequence, when the request has an
        idempotency key (the client's `Nats-Msg-Id`, which the applier does not see). A request of a batch message
        (`place` from 1) is never answered from here: its reply stays in its verdict."""
        if proposal.place:
            return verdict
        if (isinstance(verdict.reply, Pending) or (direct and verdict.reply is not None)) and not verdict.sent:
            data = self.shell.pager.fit(verdict.reply)
            if isinstance(verdict.reply, Rejected) and proposal.request.command_id:  # kept before the worker acks
                await refusals.keep(self.shell.bus, proposal.request_sequence, data)
            if proposal.inbox:
                await send_reply(self.shell.bus, s.PROPOSALS, proposal.inbox, data)
            verdict = Verdict(sent=True, poison=verdict.poison)
            self._remember(proposal, verdict)
        return verdict

    def _remember(self, proposal: Proposal, verdict: Verdict) -> None:
        self.answered[proposal.request_sequence, proposal.place] = (proposal.request, verdict)
        if len(self.answered) > REMEMBERED:
            self.answered.popitem(last=False)


def fitted(proposals: list[Proposal], answer: Verdicts, limit: int) -> bytes:
    """`answer` encoded within `limit` bytes: the node lists of the Pendings answering requests of batches shortened
    alike (as `Pager.fit` shortens a `BatchReply`'s), and if even that is too long, each reply of a request of a batch
    replaced by a rejection naming the limit (the applier still remembers the whole replies)."""
    items = [p.place > 0 for p in proposals]
    count = sum(item and isinstance(v.reply, Pending) for item, v in zip(items, answer.verdicts, strict=True))
    bare = [_unlisted(v) if item else v for item, v in zip(items, answer.verdicts, strict=True)]
    share = max(0, limit - HEADROOM - len(encode(msgspec.structs.replace(answer, verdicts=bare)))) // max(1, count)
    shortened = [_shortened(v, share) if item else v for item, v in zip(items, answer.verdicts, strict=True)]
    data = encode(msgspec.structs.replace(answer, verdicts=shortened))
    if len(data) <= limit:
        return data
    refused = Rejected(
        f"decided, but the answers to its batch are over the bus's payload limit of {limit} bytes: ask for its "
        "decision",
        "unavailable",
    )
    return encode(
        msgspec.structs.replace(
            answer,
            verdicts=[
                Verdict(refused, poison=v.poison) if item and v.reply is not None else v
                for item, v in zip(items, answer.verdicts, strict=True)
            ],
        )
    )


def _unlisted(verdict: Verdict) -> Verdict:
    """The verdict with its Pending's node lists emptied (the reasons kept)."""
    if not isinstance(verdict.reply, Pending):
        return verdict
    empty: dict[str, list[str]] = {reason: [] for reason in verdict.reply.nodes_by_reason}
    return msgspec.structs.replace(verdict, reply=msgspec.structs.replace(verdict.reply, nodes_by_reason=empty))


def _shortened(verdict: Verdict, share: int) -> Verdict:
    """The verdict with its Pending's node lists cut to fit `share` bytes more than the Pending without them."""
    if not isinstance(verdict.reply, Pending):
        return verdict
    room = len(encode(_unlisted(verdict).reply)) + share
    return msgspec.structs.replace(verdict, reply=trimmed_pending(verdict.reply, room))


async def rounds(batches: AsyncIterable[tuple[Msg, Proposals]]) -> AsyncIterator[list[tuple[Msg, Proposals]]]:
    """`batches` in order, grouped into rounds of at most `PROPOSALS_AT_ONCE` proposals (a bigger batch alone); a
    round is yielded as soon as the next batch does not fit, before any later batch is taken (decoded)."""
    round_: list[tuple[Msg, Proposals]] = []
    size = 0
    async for msg, batch in batches:
        count = len(batch.proposals)
        if round_ and size + count > PROPOSALS_AT_ONCE:
            yield round_
            round_, size = [], 0
        round_.append((msg, batch))
        size += count
    if round_:
        yield round_
