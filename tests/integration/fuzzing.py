"""The fuzz suites' sender: one connection to one live mesh, each payload sent the way its subject is reached and
waited for until the mesh took it in, and the names and logs of services that died."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections import Counter, deque
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import nats.errors
import nats.js.errors
import pytest

from loadtest.digests import live_digest
from schemas import subjects as s
from services.local.mesh import Mesh
from services.runtime.bus import Bus
from services.runtime.connection import sent
from services.runtime.settings import Settings
from services.taints.view import SUBJECTS as TAINT_SUBJECTS
from tests.integration.conftest import log_of
from tests.integration.payloads import Payload, Target

RECENT = 5
"""Messages listed when a service died."""
SETTLE_S = 2.0
"""How long, after one message, the mesh may take to answer or fold it before the next is sent (a bound, not an
assertion: a service that never answers or catches up is caught by the checks at the end)."""


class Fuzzer:
    """One mesh, one connection on one event loop, shared by every example of the module."""

    def __init__(self, mesh: Mesh, runner: asyncio.Runner) -> None:
        self.mesh, self.runner = mesh, runner
        self.settings = Settings.from_env(mesh.env)
        self.bus: Bus = runner.run(Bus.connect(self.settings, "fuzzer"))
        self.replies = runner.run(self.bus.nc.subscribe("_fuzz.replies.*"))
        self.sent = 0
        self.tally: Counter[str] = Counter()
        """Messages sent by how they were sent and the kind of payload."""
        self.recent: deque[str] = deque(maxlen=RECENT)
        """The last messages sent (a service may fail on a later message than the one that harmed it)."""

    def send(self, target: Target, payload: Payload) -> None:
        """Send one payload the way `target` is reached, then wait (bounded) until the mesh has taken it in."""
        self.runner.run(self._send(target, payload))
        self.sent += 1
        self.tally[f"{target.via}: {payload.family}"] += 1
        self.recent.append(f"{payload!r} to {target.subject}")

    async def _send(self, target: Target, payload: Payload) -> None:
        reply = f"_fuzz.replies.{self.sent}"
        try:
            if target.via == "log":
                await self.bus.js.publish(target.subject, payload.data, timeout=5.0)
            elif target.via == "request":
                headers = {"Nats-Msg-Id": f"fuzz-{secrets.token_hex(8)}", s.REPLY_HEADER: reply}
                await self.bus.js.publish(target.subject, payload.data, headers=headers, timeout=5.0)
            elif target.via == "ask":
                with contextlib.suppress(nats.errors.TimeoutError, nats.errors.NoRespondersError):
                    await self.bus.nc.request(target.subject, payload.data, timeout=SETTLE_S)
            else:
                await self.bus.nc.publish(target.subject, payload.data)
            await sent(self.bus.nc)
        except nats.errors.MaxPayloadError:
            return  # the client refuses it before it leaves: nothing reached the mesh
        await self._settle()

    async def _settle(self) -> None:
        """Until every view has folded the log's end and the scheduler's queue is empty, or a service died."""
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline and not self.dead():
            if await self._taken_in():
                return
            await asyncio.sleep(0.02)

    async def _taken_in(self) -> bool:
        end = await self.bus.last_sequence()
        ends: dict[str, int] = {
            name: end for name in ("labels", "vclusters", "scheduler", "autoscaler") if name in self.mesh.processes
        }
        if "taints" in self.mesh.processes:
            ends["taints"] = await self.bus.last_sequence(subjects=TAINT_SUBJECTS)
        for service, wanted in ends.items():
            answer = await live_digest(self.bus, service, timeout=0.5)
            if answer is None or answer.sequence < wanted:
                return False
        try:
            consumer = await self.bus.js.consumer_info(s.REQUESTS_STREAM, s.REQUESTS_CONSUMER)
        except nats.js.errors.NotFoundError:  # the scheduler has not made its work queue's consumer yet
            return False
        return not consumer.num_pending and not consumer.num_ack_pending

    def dead(self) -> dict[str, int]:
        """Service processes that exited, with their exit codes."""
        return {key: code for key, process in self.mesh.processes.items() if (code := process.poll()) is not None}

    def assert_alive(self, context: str) -> None:
        """Every service process still runs; else name the dead and the end of their logs."""
        dead = self.dead()
        if dead:
            tails = "\n".join(
                f"--- {key} (exit {code}):\n{log_of(self.mesh, key)[-2000:]}" for key, code in dead.items()
            )
            sent = "\n".join(self.recent)
            heading = "the last messages sent, oldest first (hypothesis sends the failing one again at the end)"
            pytest.fail(f"{context}: services exited: {dead}\n{tails}\n--- {heading}:\n{sent}", pytrace=False)


@contextlib.contextmanager
def fuzzing(mesh: Mesh, ready: Callable[[Mesh], Coroutine[Any, Any, None]]) -> Iterator[Fuzzer]:
    """A fuzzer on `mesh` once `ready` has set the mesh up; the mesh is closed after."""
    try:
        with asyncio.Runner() as runner:
            runner.run(ready(mesh))
            fuzzer = Fuzzer(mesh, runner)
            try:
                yield fuzzer
            finally:
                runner.run(fuzzer.bus.close())
    finally:
        mesh.close()
