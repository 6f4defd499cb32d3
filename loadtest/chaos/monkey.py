"""Kill (SIGKILL) and restart the mesh's pieces at random: each service, the standby scheduler, the decision workers
when the mesh runs them, nats-server (again on the same store) and redis-server; and a supervisor that restarts a
service that exited on its own, as a deployment's restart policy would, counting each such exit."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field

from services.local.mesh import DECIDER, SERVICES, Mesh
from services.local.servers import LocalServer

STANDBY = "scheduler-2"
"""The key of the standby scheduler the chaos mesh runs beside the first."""
NATS, REDIS = "nats-server", "redis-server"
VICTIMS = (*SERVICES, STANDBY, NATS, REDIS)
RESTART_PAUSE = 1.0
"""Seconds the supervisor waits before it restarts a service that exited on its own."""


def service_name(key: str) -> str:
    """The service a process key runs (`scheduler-2` is a scheduler)."""
    return "scheduler" if key == STANDBY else key


@dataclass
class Monkey:
    """What was killed, what exited on its own (key -> exit codes), and what is held down right now."""

    mesh: Mesh
    seed: int
    kill_every: float
    nats_outage_max: float
    kills: Counter[str] = field(default_factory=Counter)
    exits: dict[str, list[int]] = field(default_factory=dict)
    down: set[str] = field(default_factory=set)

    @property
    def workers(self) -> tuple[str, ...]:
        """The keys of the decision workers the mesh runs (`CORRAL_DECISION_WORKERS`)."""
        return tuple(key for key, kind in self.mesh.kinds.items() if kind == DECIDER)

    def _service(self, key: str) -> str:
        return self.mesh.kinds.get(key) or service_name(key)

    def _server(self, victim: str) -> LocalServer:
        return self.mesh.nats if victim == NATS else self.mesh.redis

    def _kill(self, victim: str) -> None:
        if victim in (NATS, REDIS):
            process = self._server(victim).process
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
        else:
            self.mesh.stop_service(victim, hard=True)

    def _start(self, victim: str) -> None:
        if victim in (NATS, REDIS):
            self._server(victim).start()
        else:
            self.mesh.start_service(self._service(victim), victim)

    def _downtime(self, rng: random.Random, victim: str) -> float:
        if victim == NATS:
            return rng.uniform(0.5, self.nats_outage_max)
        return rng.uniform(0.2, 3.0)

    async def kill_until(self, stop_at: float) -> None:
        """Every `kill_every` seconds or so, kill one victim and restart it after its downtime, until `stop_at`.

        The victims come in rounds, each in a random order, so that every one is killed once per round."""
        rng = random.Random(self.seed)
        order: list[str] = []
        while True:
            await asyncio.sleep(rng.uniform(0.5, 1.5) * self.kill_every)
            if time.monotonic() >= stop_at:
                return
            if not order:
                victims = (*VICTIMS, *self.workers)
                order = rng.sample(victims, len(victims))
            victim = order.pop()
            self.down.add(victim)
            try:
                await asyncio.to_thread(self._kill, victim)
                self.kills[victim] += 1
                await asyncio.sleep(self._downtime(rng, victim))
                await asyncio.to_thread(self._start, victim)
            finally:
                self.down.discard(victim)

    async def supervise(self) -> None:
        """Restart, after a pause, any service that exited while not held down by `kill_until` (runs until
        cancelled)."""
        while True:
            await asyncio.sleep(0.5)
            for key in (*SERVICES, STANDBY, *self.workers):
                process = self.mesh.processes.get(key)
                code = process.poll() if process is not None else None
                if key in self.down or code is None:
                    continue
                self.exits.setdefault(key, []).append(code)
                self.mesh.processes.pop(key, None)
                await asyncio.sleep(RESTART_PAUSE)
                if key not in self.down and key not in self.mesh.processes:
                    await asyncio.to_thread(self.mesh.start_service, self._service(key), key)
