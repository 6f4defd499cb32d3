"""Wiring of the autoscaler: follow the log, win the lease, then decide rounds, append them, and act on them.

Every decision is an event on one subject (`corral.evt.autoscaler.decisions`), appended expecting the subject's
last sequence: an instance whose view has not folded the newest decision (a deposed leader, say) cannot append.
What a decision asks for (a node started or stopped, a taint added or removed, a node removed) is done after its
event is stored; after a restart, what the log says is under way is resumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine, Sequence

import anyio
import nats.errors
import nats.js.errors

from schemas import (
    AnyEvent,
    AutoscalerElected,
    NodeDrainCancelled,
    NodeDrainStarted,
    NodeLaunchFailed,
    NodesLaunchRequested,
    NodeTerminationRequested,
    Taint,
)
from schemas import subjects as s
from schemas.queries import AutoscalerStatusQuery, AutoscalerWhyQuery
from services.autoscaler.clock import ServerClock
from services.autoscaler.handlers import Decider, event_id, scale_down_tainted
from services.autoscaler.providers import LocalProvider, Provider, provider_for
from services.autoscaler.reports import Reports
from services.autoscaler.split import message_budget
from services.autoscaler.view import AutoscalerView
from services.client import Client
from services.core.autoscale import Fleet, ScalePlan, ScalingConfig, parse_config
from services.core.documents import MAX_DOCUMENT_BYTES, check_size
from services.core.errors import CorralError, NotFoundError, RejectedError, UnavailableError
from services.core.labels import SCALE_DOWN_TAINT
from services.core.state.model import Launch
from services.runtime import metrics
from services.runtime.lease import Lease, LeaseLost
from services.runtime.queries import query_handler
from services.runtime.runner import EXIT_LEASE_LOST, ServiceExit
from services.runtime.service import Shell, service_shell
from services.runtime.settings import Settings

log = logging.getLogger("corral.autoscaler")

EXIT_BAD_CONFIG = 2
"""Exit code for a configuration file that cannot be used (as for bad `CORRAL_*` settings)."""
WRONG_LAST_SEQUENCE = 10071
"""JetStream's error code for an append whose `Nats-Expected-Last-Subject-Sequence` is not the subject's last."""
SCALE_DOWN = Taint(SCALE_DOWN_TAINT, "true", "NoSchedule")
DEPOSED = "a newer autoscaler was elected: restarting from the log as a standby"


def load_config(settings: Settings) -> ScalingConfig:
    """The node types of `CORRAL_AUTOSCALER_CONFIG`; a missing, unreadable or bad file stops the service (exit 2)."""
    path = settings.autoscaler_config
    if not path:
        raise ServiceExit(EXIT_BAD_CONFIG, "CORRAL_AUTOSCALER_CONFIG is not set: name the YAML file of node types")
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_DOCUMENT_BYTES + 1)  # a huge file (or /dev/zero) is refused without reading it all
            size = max(len(data), os.fstat(file.fileno()).st_size)
    except OSError as error:
        why = error.strerror or str(error)
        raise ServiceExit(EXIT_BAD_CONFIG, f"CORRAL_AUTOSCALER_CONFIG {path!r}: cannot read it ({why})") from None
    try:
        check_size(size, path)
        return parse_config(data, source=path)
    except RejectedError as error:
        raise ServiceExit(EXIT_BAD_CONFIG, str(error)) from None


async def main(settings: Settings) -> None:
    """Follow the log as a standby; lead when the lease is won; exit once another instance leads."""
    config = load_config(settings)
    view = AutoscalerView(settings.seed)
    async with service_shell(settings, "autoscaler", view) as shell:
        bucket = s.AUTOSCALER_LEASE_BUCKET
        lease = Lease(
            await shell.bus.lease_bucket(bucket),
            s.AUTOSCALER_LEASE_KEY,
            settings.instance,
            settings.lease_ttl,
            floor=lambda: view.cluster.autoscaler_epoch,
            bucket=lambda: shell.bus.lease_bucket(bucket),
        )
        autoscaler = Autoscaler(shell, view, config, settings, lease)
        async with anyio.create_task_group() as group:
            group.start_soon(shell.follower.run)
            group.start_soon(shell.follower.watch_log)
            epoch = await lease.acquire()
            log.info("autoscaler %s won the lease: epoch %d", settings.instance, epoch)
            try:
                group.start_soon(_hold, lease, autoscaler.epochs.put_nowait)
                await autoscaler.start(epoch)
                group.start_soon(autoscaler.elect_again)
                reports, before = autoscaler.reports, shell.caught_up
                await shell.serve(
                    {
                        s.AUTOSCALER_STATUS_QUERY: query_handler(AutoscalerStatusQuery, reports.status, before=before),
                        s.AUTOSCALER_WHY_QUERY: query_handler(AutoscalerWhyQuery, reports.why, before=before),
                    }
                )
                await autoscaler.run()
            finally:
                with anyio.CancelScope(shield=True):
                    await autoscaler.close()
                    await lease.release()


async def _logged(work: Awaitable[None]) -> None:
    """Await `work`; an exception (a bug) is logged, not raised."""
    try:
        await work
    except Exception:
        log.exception("autoscaler termination failed")


async def _hold(lease: Lease, rewon: Callable[[int], None]) -> None:
    try:
        await lease.hold(rewon)
    except LeaseLost as lost:
        raise ServiceExit(EXIT_LEASE_LOST, f"{lost}; restarting from the log as a standby") from lost


class Decisions:
    """Appends decisions on the autoscaler's subject, each expecting the subject's last sequence."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell

    async def append(self, events: Sequence[AnyEvent], decided_at: int) -> list[AnyEvent]:
        """Append `events`, decided on a view folded up to `decided_at`, and fold them; returns those stored (the
        first ones: all of them, or fewer once the subject holds a decision that view had not folded, or once one
        is refused: the ones before it are still acted on).

        A decision stored whose ack was lost is published again by the bus, with the same expected sequence: the
        stream refuses it (nats-server checks that before its duplicate window), and it is found in the log.
        """
        bus, follower = self.shell.bus, self.shell.follower
        newest = await bus.last_sequence(subjects=(s.AUTOSCALER_DECISIONS,))
        if newest > decided_at:
            await follower.wait_for(newest)
            return []
        stored: list[AnyEvent] = []
        expected = newest
        for event in events:
            try:
                (expected,) = await bus.append([event], {s.AUTOSCALER_DECISIONS: expected})
            except nats.errors.Error as error:
                if not isinstance(error, nats.js.errors.APIError) or error.err_code != WRONG_LAST_SEQUENCE:
                    if not stored:
                        raise
                    log.warning("decision not appended (%s): acting on the %d before it", error, len(stored))
                    break  # those stored are acted on; the rest is decided again
                ours = await self._stored_after(event, expected)  # retried after its ack was lost: it met itself
                if not ours:
                    log.warning("a decision was appended by someone else meanwhile: deciding again")
                    break
                expected = ours
            stored.append(event)
        with contextlib.suppress(TimeoutError):  # stored all the same: the next round folds up to the log's end first
            await follower.wait_for(expected)
        return stored

    async def _stored_after(self, event: AnyEvent, expected: int) -> int:
        """The sequence of `event` among the subject's messages after sequence `expected` (0 when it is not there).

        It may not be the last: another writer may have appended after it while its ack was lost. It is stored
        all the same, and must be acted on.
        """
        return (await self.shell.bus.stored_after([event], expected)).get(event.event_id, 0)


class Autoscaler:
    """The leading instance: decides a round every interval (or when demand changes) and does what it decided."""

    def __init__(
        self, shell: Shell, view: AutoscalerView, config: ScalingConfig, settings: Settings, lease: Lease
    ) -> None:
        self.shell, self.view, self.config, self.settings, self.lease = shell, view, config, settings, lease
        budget = message_budget(settings.max_message_bytes, shell.bus.nc.max_payload)
        self.decider = Decider(config, settings.rare_resources, settings.autoscaler_interval, budget)
        self.clock = ServerClock(shell.bus.nc)
        self.decisions = Decisions(shell)
        self.failures: dict[str, str] = {}
        """Launch id -> why its provider failed it, until the failure is in the log."""
        self.provider: Provider = provider_for(
            config.provider, settings.nats_url, self.failures.__setitem__, config.launch_timeout_s
        )
        self.commands = Client(settings.nats_url, name="autoscaler")
        self.stopping: set[asyncio.Task[None]] = set()
        """Terminations under way: each runs on its own, so a slow provider never holds up a round."""
        self.wake = asyncio.Event()
        view.on_demand = self.wake.set
        self.epochs: asyncio.Queue[int] = asyncio.Queue()
        self.epoch = 0
        """The epoch this instance was last elected under."""
        self.forged = 0
        """The newest election in the log that no lease backed (ignored)."""
        self.plan: ScalePlan | None = None
        self.fleet = Fleet()
        self.reports = Reports(self)

    async def start(self, epoch: int) -> None:
        """Be elected under `epoch`, then resume what the log says is under way."""
        await self._connect_commands()
        await self.elect(epoch)
        await self.resume()

    async def _connect_commands(self) -> None:
        """Connect the command client, however long NATS does not answer (said once in the log)."""
        warned = False
        while True:
            try:
                await self.commands.connect()
                return
            except UnavailableError as error:
                if not warned:
                    log.warning("autoscaler commands: %s; connecting again", error)
                    warned = True

    async def elect(self, epoch: int) -> None:
        """Append this instance's election (after every decision before it is folded); JetStream not answering
        and the log stalling are waited out, however long (the lease, lost meanwhile, ends the wait)."""
        while True:
            await self.shell.follower.caught_up(patient=True)
            elected = AutoscalerElected(
                event_id=event_id(),
                instance=self.settings.instance,
                epoch=epoch,
                node_type_labels={name: dict(kind.labels) for name, kind in sorted(self.config.node_types.items())},
            )
            try:
                stored = await self.decisions.append([elected], self.shell.follower.sequence)
            except TimeoutError as error:  # met before appending (the bus retries an append itself): try again
                log.warning(
                    "autoscaler election of epoch %d not appended yet (%s)", epoch, error or type(error).__name__
                )
                continue
            if stored:
                self.epoch = epoch
                metrics.ELECTIONS.add(1)
                log.info("autoscaler %s leads (epoch %d)", self.settings.instance, epoch)
                return

    async def elect_again(self) -> None:
        """Be elected again under each epoch the lease was taken again with (after an outage)."""
        while True:
            await self.elect(await self.epochs.get())

    async def resume(self) -> None:
        """Start again the launches the log has under way (the `local` provider's registered nodes too: their
        agents ran in the process that stopped), taint draining nodes, finish terminations."""
        local = isinstance(self.provider, LocalProvider)
        nodes = self.view.cluster.nodes
        for launch in sorted(self.view.cluster.launches.values(), key=lambda one: one.launch_id):
            node_type = self.config.node_types.get(launch.node_type)
            if node_type is None:
                continue
            if launch.state == "launching" or (local and launch.state in ("registered", "draining")):
                log.info("launch %s (%s): resumed", launch.launch_id, launch.node_type)
                await self.provider.launch(launch.launch_id, node_type)
            if launch.state == "draining" and launch.node_id in nodes:
                await self._command(self.commands.add_taints(launch.node_id, [SCALE_DOWN]))
            if launch.state == "terminated" and launch.node_id in nodes:
                self._in_background(self._terminate(launch))

    async def run(self) -> None:
        """Decide rounds until cancelled: every interval, and as soon as an event may have changed demand."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=self.settings.autoscaler_interval)
            self.wake.clear()
            try:
                await self.round()
            except ServiceExit:
                raise
            except (TimeoutError, nats.errors.Error) as error:  # the bus is away: the next round tries again
                log.warning("autoscaler round not done: %s", error or type(error).__name__)
            except Exception:  # a bug met in one round must not stop the autoscaler: log it, decide again later
                log.exception("autoscaler round failed")

    async def round(self) -> None:
        """Decide on a view folded up to the log's end, at the server's time, append the decisions, do what they
        ask for."""
        await self.shell.caught_up()
        await self.check_still_leading()
        decided_at = self.shell.follower.sequence
        failures = dict(self.failures)
        decided = self.decider.decide(self.view.cluster, await self.clock.read(), failures)
        self.fleet = decided.fleet
        if decided.plan is not None:
            self.plan = decided.plan
        launches = self.view.cluster.launches
        for launch_id in [one for one in failures if one not in launches or launches[one].state != "launching"]:
            self.failures.pop(launch_id, None)  # registered meanwhile, or already failed
        stored = await self.decisions.append(decided.events, decided_at) if decided.events else []
        for event in stored:
            await self.act(event)
        await self.taint_again(self.clock.now())

    async def taint_again(self, now: float) -> None:
        """Send the scale-down taint again to a draining node still without it a few rounds after the drain began
        (the first command was refused or lost); the drain cannot end in a termination before it has the taint."""
        for node_id, launch_id in sorted(self.view.cluster.launched_nodes.items()):
            launch, node = self.view.cluster.launches[launch_id], self.view.cluster.nodes.get(node_id)
            late = now - launch.changed_at > 3 * self.settings.autoscaler_interval
            if launch.state == "draining" and node is not None and late and not scale_down_tainted(node):
                await self._command(self.commands.add_taints(node_id, [SCALE_DOWN]))

    async def check_still_leading(self) -> None:
        """Exit (code 3) once the log holds an election newer than ours that the lease backs; one the lease does
        not back (the key still holds our value: a forgery) is logged once and ignored."""
        newest = self.view.cluster.autoscaler_epoch
        if newest <= max(self.epoch, self.forged):
            return
        if not await self.lease.held():
            raise ServiceExit(EXIT_LEASE_LOST, DEPOSED)
        log.warning("an autoscaler election of epoch %d is in the log, but the lease is still ours: ignored", newest)
        self.forged = newest

    async def act(self, event: AnyEvent) -> None:
        """Do what one stored decision asks for: launches and terminations are started, not waited for (the
        provider runs them on their own), so one slow or hanging command holds up neither the round nor the
        others."""
        launches, types = self.view.cluster.launches, self.config.node_types
        if isinstance(event, NodesLaunchRequested) and event.node_type in types:
            log.info("launching %d %s: %s", len(event.launch_ids), event.node_type, event.reason)
            for launch_id in event.launch_ids:
                await self.provider.launch(launch_id, types[event.node_type])
            metrics.LAUNCHES.add(len(event.launch_ids), {"node_type": event.node_type})
        elif isinstance(event, NodeLaunchFailed) and event.launch_id in launches:
            launch = launches[event.launch_id]
            log.warning("launch %s (%s) failed: %s", launch.launch_id, launch.node_type, event.reason)
            if launch.node_type in types:
                self._in_background(self.provider.terminate(launch.launch_id, types[launch.node_type], ""))
        elif isinstance(event, NodeDrainStarted):
            log.info("draining node %s: %s", event.node_id, event.reason)
            await self._command(self.commands.add_taints(event.node_id, [SCALE_DOWN]))
        elif isinstance(event, NodeDrainCancelled):
            log.info("node %s stays: %s", event.node_id, event.reason)
            await self._command(self.commands.remove_taints(event.node_id, [SCALE_DOWN_TAINT]))
        elif isinstance(event, NodeTerminationRequested) and event.launch_id in launches:
            log.info("terminating node %s: %s", event.node_id, event.reason)
            self._in_background(self._terminate(launches[event.launch_id]))

    def _in_background(self, work: Coroutine[object, object, None]) -> None:
        """Run a termination on its own; a bug met there is logged."""
        task = asyncio.create_task(_logged(work))
        self.stopping.add(task)
        task.add_done_callback(self.stopping.discard)

    async def _terminate(self, launch: Launch) -> None:
        """Stop a launched node through its provider and remove it from the cluster."""
        node_type = self.config.node_types.get(launch.node_type)
        if node_type is not None:
            await self.provider.terminate(launch.launch_id, node_type, launch.node_id)
        metrics.TERMINATIONS.add(1, {"node_type": launch.node_type})
        await self._command(self.commands.remove_node(launch.node_id))

    async def _command(self, sent: Awaitable[object]) -> None:
        """Await a command to the labels or taints service; a refusal is logged (a node gone meanwhile is fine)."""
        try:
            await sent
        except NotFoundError:
            pass
        except CorralError as error:
            log.warning("autoscaler command refused: %s", error)

    async def close(self) -> None:
        """Stop the terminations under way, the local agents and the command client."""
        for task in list(self.stopping):
            task.cancel()
        if self.stopping:
            await asyncio.wait(list(self.stopping))
        with contextlib.suppress(Exception):
            await self.provider.close()
        with contextlib.suppress(Exception):
            await self.commands.close()
