"""Wiring of the scheduler: follow the log, win the lease, then consume requests and append decisions."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import gc
import logging
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import anyio
import nats.errors
from nats.aio.msg import Msg

from schemas import subjects as s
from schemas.commands import RequestBatch, SchedulerRequest
from schemas.queries import DecisionQuery, StatusQuery
from schemas.replies import BatchReply, DurableReply, Rejected, RequestReply
from services.core.errors import CodecError
from services.runtime import refusals
from services.runtime.codec import encode
from services.runtime.elections import new_election, record_election
from services.runtime.lease import Lease, LeaseLost
from services.runtime.metrics import ELECTIONS
from services.runtime.queries import query_handler
from services.runtime.runner import EXIT_LEASE_LOST, ServiceExit
from services.runtime.service import Shell, service_shell
from services.runtime.settings import Settings
from services.runtime.work_queue import (
    REQUESTS_AT_ONCE,
    answer_and_ack,
    durable_request,
    pull,
    request_consumer,
    request_sequence,
    tell_no_room,
)
from services.scheduler import measure
from services.scheduler.applier import DEPOSED, Applier
from services.scheduler.handlers import handle
from services.scheduler.view import SchedulerView, own_events

log = logging.getLogger("corral.scheduler")

R = TypeVar("R")


class Writer:
    """Appends what the cluster decided, in order, one batch at a time; knows when nothing is unconfirmed."""

    def __init__(self, shell: Shell, view: SchedulerView) -> None:
        self.shell, self.view = shell, view
        self.lock = asyncio.Lock()
        self.confirmed = 0
        self.unconfirmed = False
        self.dirty = asyncio.Event()

    def settled(self) -> bool:
        """No event of ours is waiting to be appended or to come back through the log."""
        unwritten = self.lock.locked() or self.unconfirmed or bool(self.view.unwritten)
        return not unwritten and self.confirmed <= self.view.sequence

    def all_stored_and_folded(self) -> bool:
        """`settled`, and we were not deposed (then the view holds decisions every fold of the log ignores: it must
        never be a snapshot)."""
        return self.settled() and not self.view.deposed()

    async def flush(self) -> int:
        """Append everything decided so far (call with `lock` held); the sequence of the first event, 0 if none.

        Events taken and never confirmed (the append failed, or the service stopped meanwhile) keep
        `all_stored_and_folded` false for good, so no snapshot records decisions the log may not hold. Events stored
        at sequences the view had folded before this append went to a new log (the event stream was made again:
        `LogReplaced`), or repeat an append stored earlier: the log's identity is checked. The echo of this very
        append may be folded before its ack is read, so what the view folds meanwhile proves nothing.
        """
        events = self.view.take_unwritten()
        if not events:
            return 0
        self.unconfirmed = True
        folded_before = self.view.sequence
        sequences = await self.shell.bus.append(events, batched=True)
        if sequences[0] <= folded_before:  # not a new append to the log we folded
            # LogReplaced when it is another log: nothing of this batch is answered
            await self.shell.bus.with_retries(self.shell.follower.check_log, "the event log's identity")
        self.confirmed = max(self.confirmed, sequences[-1])
        self.unconfirmed = False
        return sequences[0]

    async def flush_reactions(self) -> None:
        """Append what the leader decided in reaction to other services' events, as soon as it decides it."""
        while True:
            await self.dirty.wait()
            self.dirty.clear()
            async with self.lock:
                await self.flush()


async def main(settings: Settings) -> None:
    """Follow the log as a standby; lead when the lease is won; exit once another instance leads."""
    view = SchedulerView(settings.seed, settings.rare_resources)
    writer: Writer | None = None
    async with service_shell(
        settings,
        "scheduler",
        view,
        ready=lambda: writer is None or writer.all_stored_and_folded(),
        settled=lambda: writer is None or writer.settled(),
    ) as shell:
        await shell.bus.ensure_streams((s.REQUESTS_STREAM,))  # the work queue is the scheduler's alone
        await refusals.declare(shell.bus)  # kept before a refused request is acked
        writer = Writer(shell, view)
        measure.observe(view)
        _freeze_heap()
        lease = Lease(
            await shell.bus.lease_bucket(),
            s.SCHEDULER_LEASE_KEY,
            settings.instance,
            settings.lease_ttl,
            floor=lambda: view.cluster.view.epoch,
            bucket=shell.bus.lease_bucket,
        )
        leader = Leader(shell, view, writer, settings.instance)
        async with anyio.create_task_group() as group:
            group.start_soon(shell.follower.run)
            group.start_soon(shell.follower.watch_log)
            epoch = await lease.acquire()
            log.info("scheduler %s won the lease: epoch %d", settings.instance, epoch)
            group.start_soon(_hold, lease, leader.epochs.put_nowait)  # renewed from now on, while taking over too
            await leader.take_over(epoch)
            group.start_soon(leader.take_over_again)
            group.start_soon(writer.flush_reactions)
            await _serve_queries(shell, view)
            try:
                if settings.decision_workers:
                    await _applier(shell, view, writer, leader).run()
                else:
                    await _consume_requests(shell, view, writer, settings, leader)
            finally:
                with anyio.CancelScope(shield=True):
                    await lease.release()


class Leader:
    """Leads under the epochs the lease gives: the first one won, and any won again after the key lapsed."""

    def __init__(self, shell: Shell, view: SchedulerView, writer: Writer, instance: str) -> None:
        self.shell, self.view, self.writer, self.instance = shell, view, writer, instance
        self.epochs: asyncio.Queue[int] = asyncio.Queue()
        self.elected_at = 0
        """The sequence of this instance's latest election in the log."""

    async def take_over_again(self) -> None:
        """Be elected again under each epoch the lease was taken again with (after an outage)."""
        while True:
            await self.take_over(await self.epochs.get())

    async def take_over(self, epoch: int) -> None:
        """Record and append the election of `epoch`, fold up to it (the view leads from that event on) and flush
        the reactions it caught up on. All under the writer lock, and with every event of an earlier epoch of ours
        already in the log and folded, so no decision is lost or doubled across epochs."""
        shell, view, writer = self.shell, self.view, self.writer
        async with writer.lock:
            if view.leading:
                await self._flush_and_catch_up()
            elected = new_election(epoch, self.instance)
            await record_election(shell.bus.js, elected, replicas=shell.bus.settings.replicas)
            view.awaited_election = elected.event_id
            (sequence,) = await shell.bus.append([elected])
            await shell.follower.wait_patiently(sequence, f"the election of epoch {epoch}")
            assert view.own_echo is not None and view.cluster.epoch == epoch
            shell.bus.recognise = own_events(view.cluster.event_prefix, view.own_echo)
            view.on_decided = writer.dirty.set
            await writer.flush()
            self.elected_at = sequence
        ELECTIONS.add(1)
        log.info("scheduler %s leads from sequence %d (epoch %d)", self.instance, sequence, epoch)

    async def _flush_and_catch_up(self) -> None:
        """Append what is decided and fold the log to its end (however long the log stalls); exit when another
        election came in between."""
        if self.writer.unconfirmed:
            raise ServiceExit(EXIT_LEASE_LOST, "an append was never confirmed: restarting from the log")
        await self.writer.flush()
        await self.shell.follower.wait_patiently(self.writer.confirmed, "settling before an election")
        await self.shell.follower.caught_up(patient=True)
        if self.view.deposed():
            raise ServiceExit(EXIT_LEASE_LOST, DEPOSED)


def _freeze_heap() -> None:
    """Move what start-up built (the replayed view, modules) out of the collector's reach.

    Full collections would otherwise walk every node, actor and index of the view again and again; what is
    frozen is still freed by reference counting when it is dropped.
    """
    gc.collect()
    gc.freeze()


async def _hold(lease: Lease, rewon: Callable[[int], None]) -> None:
    try:
        await lease.hold(rewon)
    except LeaseLost as lost:
        raise ServiceExit(EXIT_LEASE_LOST, f"{lost}; restarting from the log as a standby") from lost


async def _serve_queries(shell: Shell, view: SchedulerView) -> None:
    await shell.serve(
        {
            s.STATUS_QUERY: query_handler(StatusQuery, view.status, before=shell.caught_up, pager=shell.pager),
            s.DECISION_QUERY: query_handler(DecisionQuery, view.decision, before=shell.caught_up, pager=shell.pager),
        }
    )


def _applier(shell: Shell, view: SchedulerView, writer: Writer, leader: Leader) -> Applier:
    """The applier of the decision workers' proposals, under this leader's elections."""

    async def still_elected(appended_from: int) -> None:
        await _check_still_elected(shell, view, leader.elected_at, appended_from)

    return Applier(shell, view, writer, still_elected, functools.partial(guarded, shell))


PIPELINE_DEPTH = 4
"""How many appended batches may wait for their answers while the scheduler fetches and decides the next ones."""


@dataclasses.dataclass(frozen=True, slots=True)
class Appended:
    """A batch whose events the log has stored (from sequence `appended_from`, 0 when it appended nothing),
    waiting to be answered."""

    appended_from: int
    batch: Sequence[Msg]
    decided: Sequence[Decided]


async def _consume_requests(
    shell: Shell, view: SchedulerView, writer: Writer, settings: Settings, leader: Leader
) -> None:
    """Decide batch after batch, pipelined: while batch N waits until the log confirms it still counts (our
    election is the newest before it), batch N+1 is fetched, decided on a view that already holds N's decisions,
    and appended. Batches are answered and acked strictly in the order they were appended, each only once its
    events are stored and still count (`_answer_in_order`)."""
    requests = await pull(shell.bus, s.REQUESTS_SUBJECTS, s.REQUESTS_STREAM, request_consumer(settings))
    shell.subscriptions.append(requests)
    appended: asyncio.Queue[Appended] = asyncio.Queue(maxsize=PIPELINE_DEPTH)
    async with anyio.create_task_group() as group:
        group.start_soon(_answer_in_order, shell, view, leader, appended)
        while True:
            try:
                batch = await requests.fetch(settings.request_batch, timeout=0.5)
            except (TimeoutError, nats.errors.TimeoutError):
                continue
            while batch:
                async with writer.lock:
                    if view.deposed():
                        raise ServiceExit(EXIT_LEASE_LOST, DEPOSED)
                    decided = await _decide_part(shell, view, batch)
                    part, batch = batch[: len(decided)], batch[len(decided) :]
                    flushed = asyncio.ensure_future(writer.flush())
                    full = await shell.bus.done_or_full(flushed)
                    if full:  # the clients need not wait their whole timeout: the requests stay queued
                        await tell_no_room(shell.bus, part, full)
                    appended_from = await flushed
                await appended.put(Appended(appended_from, part, decided))


async def _decide_part(shell: Shell, view: SchedulerView, batch: Sequence[Msg]) -> list[Decided]:
    """Decide the first messages of `batch` that together hold at most `REQUESTS_AT_ONCE` requests (at least one
    message, however many it holds)."""
    decided: list[Decided] = []
    requests = 0
    for msg in batch:
        if decided and requests >= REQUESTS_AT_ONCE:
            break
        decided.append(await _decide(shell, view, msg))
        reply = decided[-1][0]
        requests += len(reply.replies) if isinstance(reply, BatchReply) else 1
    return decided


async def _answer_in_order(
    shell: Shell, view: SchedulerView, leader: Leader, appended: asyncio.Queue[Appended]
) -> None:
    """Answer appended batches in their order, each once the log shows it still counts (`_check_still_elected`)."""
    while True:
        done = await appended.get()
        await _check_still_elected(shell, view, leader.elected_at, done.appended_from)
        await _answer(shell, done.batch, done.decided)


async def _check_still_elected(shell: Shell, view: SchedulerView, elected_at: int, appended_from: int) -> None:
    """Raise `ServiceExit` when the log holds an election newer than ours (at `elected_at`) before what we just
    appended (from `appended_from`; 0 when the batch appended nothing).

    Every fold ignores what we appended after a newer election, so the batch must be neither answered nor acked:
    its requests are delivered again to the new leader, which decides them. This closes the window in which a
    leader that lost its lease, but has not noticed yet, would tell a client about a placement no view will hold.
    The view has usually folded the log up to the batch already; a batch with nothing appended folds up to the
    newest message on the elections subject (an unreadable one there is skipped by the fold, and deposes no one).
    While the log stalls, nothing is answered: the wait goes on however long (the lease, lost meanwhile, ends it).
    """
    follower, why = shell.follower, "confirming this leader is still elected"
    if appended_from:
        await follower.wait_patiently(appended_from - 1, why)
    else:
        elections = (s.ELECTIONS,)
        newest = await shell.bus.with_retries(
            lambda: shell.bus.last_sequence(subjects=elections), "the newest election"
        )
        if newest == elected_at:
            return
        await follower.wait_patiently(newest, why)  # the reader skips an election no lease produced
    if view.deposed():
        raise ServiceExit(EXIT_LEASE_LOST, DEPOSED)


Decided = tuple[DurableReply, bool]
"""A request's reply (a batch's: one reply for all its requests), and whether the request is poison: unreadable, or
one the scheduler failed on."""


async def _decide(shell: Shell, view: SchedulerView, msg: Msg) -> Decided:
    """Decide the request `msg` carries, or each request of its batch in order (one reply for them all); each
    request counted, the message timed."""
    began = time.perf_counter()
    decided = await _decide_message(shell, view, msg)
    measure.timed(time.perf_counter() - began, measure.stored_at(msg.reply))
    return decided


async def _decide_message(shell: Shell, view: SchedulerView, msg: Msg) -> Decided:
    try:
        request = durable_request(msg, shell.bus.settings.max_message_bytes)
    except CodecError as error:
        log.warning("request on %s rejected: %s", msg.subject, error)
        await shell.bus.dead_letter("scheduler", msg.data, str(error), msg.subject, request=request_sequence(msg))
        unreadable = Rejected(str(error))
        measure.counted(measure.UNREADABLE, unreadable)
        return unreadable, True
    if isinstance(request, RequestBatch):
        return BatchReply(await _decide_batch(shell, view, msg, request.requests)), False
    reply, poison = await guarded(
        shell, msg.subject, lambda: msg.data, lambda: handle(view, request), lambda: request_sequence(msg)
    )
    measure.counted(request, reply)
    return reply, poison


async def _decide_batch(
    shell: Shell, view: SchedulerView, msg: Msg, requests: Sequence[SchedulerRequest]
) -> list[RequestReply]:
    """Decide and count each request of a batch in order, in one plain loop (none of the coroutines, lambdas and
    partials `guarded` takes per request: this is the hot path); one the scheduler fails on is set aside as `guarded`
    does, under its place in the batch (from 1)."""
    replies: list[RequestReply] = []
    for place, request in enumerate(requests, start=1):
        try:
            reply: RequestReply = handle(view, request)
        except Exception as error:
            reply = await _set_aside(shell, msg.subject, encode(request), error, request_sequence(msg), place)
        measure.counted(request, reply)
        replies.append(reply)
    return replies


async def guarded(
    shell: Shell,
    subject: str,
    data: Callable[[], bytes],
    decide: Callable[[], R],
    sequence: Callable[[], int],
) -> tuple[R | Rejected, bool]:
    """`decide()` for a request alone, and whether it is poison: a bug must not stop the scheduler for everyone, so a
    request it fails on is set aside (`_set_aside`, as `data()` under `sequence()`) and answered as the scheduler
    failing."""
    try:
        return decide(), False
    except Exception as error:
        return await _set_aside(shell, subject, data(), error, sequence(), 0), True


async def _set_aside(shell: Shell, subject: str, data: bytes, error: Exception, sequence: int, place: int) -> Rejected:
    """Log the bug `error` (call it while handling it), keep the request in dead letters (once per `sequence` in
    `CORRAL_REQUESTS` and `place` in its batch, from 1, 0 alone; sequence 0: no key) and answer it as the scheduler
    failing."""
    log.exception("request on %s failed", subject)
    await shell.bus.dead_letter(
        "scheduler", data, f"{type(error).__name__}: {error}", subject, request=sequence, index=place
    )
    return Rejected(f"the scheduler failed on this request ({type(error).__name__}: {error})", "unavailable")


async def _answer(shell: Shell, batch: Sequence[Msg], decided: Sequence[Decided]) -> None:
    """Send each reply to its request's inbox; ack a decided request, terminate a poison one (never redelivered)."""
    for msg, (reply, poison) in zip(batch, decided, strict=True):
        await answer_and_ack(shell.bus, shell.pager.fit, msg, reply, poison=poison)
