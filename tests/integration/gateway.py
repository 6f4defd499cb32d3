"""The gateway under test: a mesh with `python -m services.gateway` on a free port, and HTTP helpers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from services.local.mesh import SERVICES, Mesh
from services.local.servers import free_port
from tests.integration.conftest import start_test_mesh
from tests.support.servers import ServerPath

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
JSON = {**AUTH, "Content-Type": "application/json"}


def http_base(mesh: Mesh) -> str:
    """The gateway's address in this mesh."""
    return f"http://127.0.0.1:{mesh.settings['CORRAL_HTTP_PORT']}"


def wait_ready(base: str, timeout: float = 30.0) -> None:
    """Poll /readyz until every service answers through the gateway."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{base}/readyz", timeout=5.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"the gateway at {base} was not ready within {timeout:g}s")
        time.sleep(0.1)


@contextmanager
def gateway_mesh(data_dir: Path, path: ServerPath, heartbeat_timeout: float = 60) -> Iterator[Mesh]:
    """A mesh with the gateway (token set; nodes live `heartbeat_timeout` seconds without heartbeats, a minute
    by default; each process's /metrics on a free port), once /readyz says 200."""
    settings = {
        "CORRAL_HTTP_PORT": str(free_port()),
        "CORRAL_HTTP_TOKEN": TOKEN,
        "CORRAL_HEARTBEAT_TIMEOUT": str(heartbeat_timeout),
    }
    mesh = start_test_mesh(data_dir, path, services=(*SERVICES, "gateway"), settings=settings, metrics_from=0)
    try:
        wait_ready(http_base(mesh), timeout=90.0)  # a loaded machine starts the gateway slowly
        yield mesh
    finally:
        mesh.close()


def cluster_state(http: httpx.Client) -> dict[str, Any]:
    """What the mutating routes could change: nodes (labels, taints, usage), actors, groups, pending, clusters."""
    routes = ("nodes", "actors", "placement-groups", "pending", "vclusters", "taints")
    state = {}
    for route in routes:
        answer = http.get(f"/api/v1/{route}")
        assert answer.status_code == 200, answer.text
        state[route] = answer.json()
    return state
