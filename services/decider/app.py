"""Wiring of a decision worker: follow the log, decide batches of requests, have the leader's applier store them.

Each worker pulls requests from the same work queue the scheduler pulls alone without workers, decides a batch in
the core against its own view (a new actor of the root gets a node; anything else is left to the applier), and
proposes the batch to the leading scheduler's applier over `PROPOSALS`, keeping the requests unacked. Once the
applier has stored what it accepted and answered, the worker answers the clients and acks those requests; a refused
proposal is decided again after folding the log up to the applier's sequence, at most `RETRIES` times, and then left
to the applier. When no applier answers in time the batch is nak'ed and delivered again (the applier answers a
request it already decided as it did the first time).
"""

from __future__ import annotations

import asyncio
import logging

import anyio
import nats.errors
from nats.aio.msg import Msg

from schemas import subjects as s
from schemas.commands import SchedulerRequest, SubmitActor
from schemas.proposals import Proposal, Proposals, Verdicts
from schemas.replies import Rejected
from services.core.errors import CodecError, RejectedError
from services.core.prng import SplitMix64, stable_hash
from services.core.state import Resources
from services.runtime import refusals
from services.runtime.codec import decode, encode
from services.runtime.service import Shell, service_shell
from services.runtime.settings import Settings
from services.runtime.views import FoldedCluster
from services.runtime.work_queue import answer_and_ack, inbox_of, pull, request_consumer, request_sequence

log = logging.getLogger("corral.decider")

RETRIES = 2
"""Times a refused proposal is decided again by the worker before the applier decides it itself."""
NO_APPLIER_PAUSE_S = 0.1
"""How long to wait before proposing again while no scheduler leads (an election under way)."""

Waiting = list[tuple[Msg, SchedulerRequest]]


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
            await self.decide(await self._readable(batch))

    async def _readable(self, batch: list[Msg]) -> Waiting:
        """The batch's requests; an unreadable one is set aside in dead letters, answered and never delivered again."""
        readable: Waiting = []
        bus = self.shell.bus
        for msg in batch:
            try:
                readable.append((msg, decode(msg.data, SchedulerRequest, max_bytes=bus.settings.max_message_bytes)))
            except CodecError as error:
                log.warning("request on %s rejected: %s", msg.subject, error)
                await bus.dead_letter("scheduler", msg.data, str(error), msg.subject, request=request_sequence(msg))
                await answer_and_ack(bus, self.shell.pager.fit, msg, Rejected(str(error)), poison=True)
        return readable

    async def decide(self, waiting: Waiting) -> None:
        """Propose the requests until each is answered (the last time leaving them all to the applier)."""
        for attempt in range(RETRIES + 1):
            if not waiting:
                return
            verdicts = await self._propose(waiting, choose=attempt < RETRIES)
            if verdicts is None:
                for msg, _request in waiting:
                    await msg.nak()
                return
            refused: Waiting = []
            for (msg, request), verdict in zip(waiting, verdicts.verdicts, strict=True):
                if verdict.reply is None and not verdict.sent:
                    refused.append((msg, request))
                else:
                    await answer_and_ack(
                        self.shell.bus, self.shell.pager.fit, msg, verdict.reply, poison=verdict.poison
                    )
            waiting = refused
            if waiting:
                try:
                    await self.shell.follower.wait_for(verdicts.sequence)
                except TimeoutError:
                    log.warning("the view did not fold up to %d in time; proposing again", verdicts.sequence)

    async def _propose(self, waiting: Waiting, *, choose: bool) -> Verdicts | None:
        """Decide the requests (with `choose`, else leave them to the applier) and have the applier store them;
        None when no applier answered in time."""
        taken: dict[str, Resources] = {}
        proposals = [self._proposal(msg, request, taken if choose else None) for msg, request in waiting]
        limit = max(1, self.shell.bus.nc.max_payload // 2)
        verdicts: list[Verdicts] = []
        for part in _parts(proposals, [len(msg.data) for msg, _request in waiting], limit):
            answer = await self._ask(Proposals(self.settings.instance, self.view.sequence, part))
            if answer is None or len(answer.verdicts) != len(part):
                return None
            verdicts.append(answer)
        return Verdicts(max(v.sequence for v in verdicts), [v for answer in verdicts for v in answer.verdicts])

    def _proposal(self, msg: Msg, request: SchedulerRequest, taken: dict[str, Resources] | None) -> Proposal:
        node_id, drawn = "", -1
        if taken is not None and isinstance(request, SubmitActor):
            drawn = self.prng.state
            try:
                node_id = self.view.cluster.propose(request.request, self.prng, taken) or ""
            except RejectedError:
                pass  # a request the core refuses: the applier answers it with the reason
            except Exception:  # a bug must not stop the worker: the applier decides (and sets aside) the request
                log.exception("proposing for request on %s failed", msg.subject)
        return Proposal(request, request_sequence(msg), inbox_of(msg), node_id, drawn)

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
