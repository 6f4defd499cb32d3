"""A NATS cluster on loopback (the load test's `--replicas`, the tests): nats-server processes with JetStream, routed
to one another."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

import nats
import nats.errors
from nats.js import api

from services.local.servers import LocalServer, free_port, nats_server


@dataclass
class NatsCluster:
    """The servers, named s0, s1, ... (JetStream's peer names) in the order of `servers`."""

    servers: list[LocalServer]

    @property
    def url(self) -> str:
        """Every server's URL, comma-separated (what `CORRAL_NATS_URL` takes)."""
        return ",".join(f"nats://127.0.0.1:{server.port}" for server in self.servers)

    def named(self, name: str) -> LocalServer:
        """The server JetStream calls `name`."""
        return self.servers[int(name.removeprefix("s"))]

    def kill(self, name: str) -> None:
        """Kill server `name` at once (SIGKILL: no goodbye to its peers or clients)."""
        process = self.named(name).process
        assert process is not None
        process.kill()
        process.wait()

    def close(self) -> None:
        """Stop every server."""
        for server in self.servers:
            server.stop()


def start_cluster(data_dir: Path, size: int = 3, name: str = "corral") -> NatsCluster:
    """`size` nats-servers with JetStream, clustered on free loopback ports; wait with `wait_for_jetstream`."""
    routes = [free_port() for _ in range(size)]
    servers = []
    for index in range(size):
        server = nats_server(data_dir / f"s{index}")
        others = ",".join(f"nats://127.0.0.1:{port}" for other, port in enumerate(routes) if other != index)
        server.command += ["-n", f"s{index}", "--cluster_name", name]
        server.command += ["--cluster", f"nats://127.0.0.1:{routes[index]}", "--routes", others]
        servers.append(server)
    cluster = NatsCluster(servers)
    try:
        for server in servers:
            server.start()
    except BaseException:
        cluster.close()
        raise
    return cluster


async def wait_for_jetstream(url: str, timeout: float = 20.0) -> None:
    """Wait until the cluster has a meta leader and JetStream answers (it refuses requests until then)."""
    nc = await nats.connect(url.split(","), connect_timeout=2)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                info = await nc.jetstream(timeout=1.0).account_info()
                if isinstance(info, api.AccountInfo):
                    return
            except (TimeoutError, nats.errors.Error):
                if time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.2)
    finally:
        with contextlib.suppress(nats.errors.Error):
            await nc.close()
