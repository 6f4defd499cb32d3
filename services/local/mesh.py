"""The embedded dev mesh: nats-server, redis-server and the service processes, started and stopped together."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from services.local import preloaded
from services.local.servers import LocalServer, free_port, nats_server, redis_server
from services.runtime.settings import Settings

SERVICES = ("labels", "taints", "vclusters", "scheduler")
"""The service processes `corral up` runs."""
GATEWAY = "gateway"
"""The HTTP API `corral up` runs beside the services (on `CORRAL_HTTP_PORT`)."""
DECIDER = "decider"
"""The decision workers, `CORRAL_DECISION_WORKERS` of them, started beside the scheduler."""
AUTOSCALER = "autoscaler"
"""The fifth service, run when node types are given (`corral up --autoscaler CONFIG.yaml`)."""
FIRST_BACK_OFF_S = 0.5
"""How long a service that exits soon after starting, a second time in a row, waits to start; it doubles each time."""
LONGEST_BACK_OFF_S = 30.0
"""The longest wait before a service is started again."""
STABLE_S = 60.0
"""A service that ran this long before exiting is started again at once (its back-off starts over)."""


class ServiceProcess(Protocol):
    """A running service process: a `subprocess.Popen`, or a `preloaded.PreloadedService`."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, signal: int) -> None: ...

    def kill(self) -> None: ...


@dataclass
class Mesh:
    """Servers and services on this machine; `env` is what a process needs to join it."""

    data_dir: Path
    nats: LocalServer
    redis: LocalServer
    settings: dict[str, str] = field(default_factory=dict)
    processes: dict[str, ServiceProcess] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    """Which service each process runs (a standby scheduler's key is its instance name)."""
    revived: list[str] = field(default_factory=list)
    """A line per service process started again by `revive`."""
    metrics_from: int | None = None
    """Where services serve `/metrics`: None nowhere, 0 on free ports, else on consecutive ports from this one."""
    metrics_ports: dict[str, int] = field(default_factory=dict)
    """Each service process's `/metrics` port (kept when it is started again)."""
    clock: Callable[[], float] = time.monotonic
    started_at: dict[str, float] = field(default_factory=dict)
    """When each service process started (by `clock`)."""
    quick_exits: dict[str, int] = field(default_factory=dict)
    """Service process key -> how many times in a row it exited within `STABLE_S` of starting."""
    restart_at: dict[str, float] = field(default_factory=dict)
    """Service process key -> when (by `clock`) it is started again, for those that exited and wait."""
    preloaded: bool = True
    """Fork the services from a parent that imported them once (`preloaded`), rather than run `python -m` (each
    such start imports the service again: about 0.6 s of CPU)."""

    @property
    def nats_url(self) -> str:
        """Where clients connect."""
        return f"nats://127.0.0.1:{self.nats.port}"

    @property
    def redis_url(self) -> str:
        """Where the services keep their snapshots."""
        return f"redis://127.0.0.1:{self.redis.port}/0"

    @property
    def env(self) -> dict[str, str]:
        """The environment of a service or client of this mesh."""
        return {
            **os.environ,
            "CORRAL_NATS_URL": self.nats_url,
            "CORRAL_REDIS_URL": self.redis_url,
            **self.settings,
        }

    def start_service(self, name: str, instance: str = "") -> ServiceProcess:
        """Start one service process (a second scheduler is a standby); its log goes to the data folder."""
        key = instance or name
        env = {**self.env, "CORRAL_INSTANCE": key, "CORRAL_METRICS_PORT": str(self.metrics_port(key))}
        log_path = self.data_dir / f"{key}.log"
        process: ServiceProcess
        if self.preloaded:
            process = preloaded.start(name, env, log_path)
        else:
            with log_path.open("ab") as log:
                process = subprocess.Popen(
                    [sys.executable, "-m", f"services.{name}"], env=env, stdout=log, stderr=subprocess.STDOUT
                )
        self.processes[key] = process
        self.kinds[key] = name
        self.started_at[key] = self.clock()
        return process

    def metrics_port(self, key: str) -> int:
        """The `/metrics` port of service process `key` (0: none), chosen the first time it starts."""
        if self.metrics_from is None:
            return 0
        if key not in self.metrics_ports:
            taken = len(self.metrics_ports)
            self.metrics_ports[key] = self.metrics_from + taken if self.metrics_from else free_port()
        return self.metrics_ports[key]

    def revive(self) -> list[str]:
        """Start again every service process that exited, whatever its exit code (lease lost, event log replaced, a
        crash); a line for each (also kept in `revived`). A service stopped by `stop_service` is not started again.

        The first time at once; a service that exits again within `STABLE_S` of starting waits before it starts
        again, from `FIRST_BACK_OFF_S` and twice as long each time in a row, up to `LONGEST_BACK_OFF_S` (as
        Kubernetes backs off a crash-looping container)."""
        lines = []
        now = self.clock()
        for key, process in list(self.processes.items()):
            code = process.poll()
            if code is None:
                continue
            if key not in self.restart_at:
                quick = now - self.started_at.get(key, now) < STABLE_S
                self.quick_exits[key] = self.quick_exits.get(key, 0) + 1 if quick else 0
                self.restart_at[key] = now + self.back_off_s(key)
            if now < self.restart_at[key]:
                continue
            waited = self.back_off_s(key)
            del self.restart_at[key]
            self.start_service(self.kinds[key], instance=key if key != self.kinds[key] else "")
            after = f" after {waited:g}s (it exits soon after starting)" if waited else ""
            lines.append(f"the {key} service exited with code {code}; started again{after}")
        self.revived.extend(lines)
        return lines

    def back_off_s(self, key: str) -> float:
        """How long service process `key` waits before it is started again, after its quick exits in a row."""
        quick_exits = self.quick_exits.get(key, 0)
        return 0.0 if quick_exits < 2 else min(LONGEST_BACK_OFF_S, FIRST_BACK_OFF_S * 2 ** (quick_exits - 2))

    def stop_service(self, key: str, *, hard: bool = False) -> None:
        """Stop one service: SIGTERM and wait (a graceful drain), or SIGKILL with `hard`."""
        process = self.processes.pop(key, None)
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGKILL if hard else signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def stop(self) -> None:
        """Stop every service, then the servers."""
        for key in list(self.processes):
            self.stop_service(key)
        self.nats.stop()
        self.redis.stop()

    def close(self) -> None:
        """Stop everything, then release the servers (a container is removed; a process has nothing more)."""
        try:
            self.stop()
        finally:
            try:
                self.nats.close()
            finally:
                self.redis.close()


def decision_workers(env: Mapping[str, str]) -> int:
    """How many decision workers run beside the scheduler: `CORRAL_DECISION_WORKERS` (checked; `SettingsError`)."""
    name = "CORRAL_DECISION_WORKERS"
    return Settings.from_env({name: env[name]} if name in env else {}).decision_workers


def start_mesh(
    data_dir: Path,
    *,
    nats_port: int | None = None,
    redis_port: int | None = None,
    services: tuple[str, ...] = SERVICES,
    settings: dict[str, str] | None = None,
    servers: Callable[[Path], tuple[LocalServer, LocalServer]] | None = None,
    durable: bool = False,
    metrics_from: int | None = None,
    preloaded: bool = True,
) -> Mesh:
    """Start nats-server and redis-server on free (or given) ports, then the services (and beside the scheduler
    `CORRAL_DECISION_WORKERS` decision workers, from `settings` or the environment).

    Redis is throwaway unless `durable` (then its append-only file in the data folder keeps the snapshots across
    restarts, as `corral up` wants). `servers` makes the NATS and Redis servers from the data folder instead
    (containers, in tests). `metrics_from` gives each service its own `/metrics` port (see `Mesh.metrics_from`).
    `preloaded` (the default) forks the services from a parent that imported them once (see `Mesh.preloaded`);
    without it, each is `python -m services.<name>`.
    """
    workers = decision_workers({**os.environ, **(settings or {})})
    data_dir.mkdir(parents=True, exist_ok=True)
    if servers is None:
        nats = nats_server(data_dir / "nats", nats_port)
        redis = redis_server(data_dir / "redis", redis_port, durable=durable)
    else:
        nats, redis = servers(data_dir)
    mesh = Mesh(data_dir, nats, redis, metrics_from=metrics_from, preloaded=preloaded)
    mesh.settings = dict(settings or {})
    try:
        mesh.nats.start()
        mesh.redis.start()
        for name in services:
            mesh.start_service(name)
        for index in range(workers if "scheduler" in services else 0):
            mesh.start_service(DECIDER, instance=f"{DECIDER}-{index + 1}")
    except BaseException:
        mesh.close()
        raise
    return mesh
