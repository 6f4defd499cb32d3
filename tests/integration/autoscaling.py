"""Helpers of the autoscaler's end-to-end tests: a mesh with the autoscaler and a config file, and the log read
back."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

from schemas import AnyEvent, NodesLaunchRequested
from services.client import Client
from services.local.mesh import SERVICES, Mesh
from services.runtime.bus import Bus
from services.runtime.settings import Settings
from tests.integration.conftest import LASTING_NODES, start_test_mesh, wait_ready
from tests.support.servers import ServerPath

TYPES = """
provider: {provider}
idle_timeout_s: {idle}
upscaling_speed: 1.0
launch_timeout_s: {launch_timeout}
node_types:
  cpu-4:
    resources: {{CPU: 4}}
    labels: {{type: 4c8g, zone: usa-1}}
    max_workers: 5
  cpu-16:
    resources: {{CPU: 16}}
    labels: {{type: 16c32g, zone: usa-2}}
    max_workers: 3
    cost: 3
  gpu-a100:
    resources: {{CPU: 16, GPU: 4}}
    labels: {{accelerator-type: A100}}
    taints: {{gpu_node: "true"}}
    max_workers: 2
    cost: 10
"""

AUTOSCALER_INTERVAL = {"CORRAL_AUTOSCALER_INTERVAL": "0.2"}
ACTS_WITHIN_S = 60.0
"""How long a test waits for the autoscaler, or the scheduler after it, to act: its rounds take seconds on a busy
machine (a wait for a condition: it costs nothing when they are quick; 10 s once ran out on a fresh clone)."""
FAST_AUTOSCALER = {**AUTOSCALER_INTERVAL, "CORRAL_RARE_RESOURCES": "GPU"}


def write_config(
    folder: Path, *, provider: str = "{type: local}", idle: float = 600, launch_timeout: float = 10
) -> Path:
    """The test node types (cpu-4, cpu-16 in zone usa-2 at cost 3, gpu-a100 tainted gpu_node at cost 10)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "autoscaler.yaml"
    path.write_text(TYPES.format(provider=provider, idle=idle, launch_timeout=launch_timeout))
    return path


@asynccontextmanager
async def autoscaled_mesh(
    data_dir: Path,
    server_path: ServerPath,
    config: Path,
    settings: dict[str, str] | None = None,
    metrics_from: int | None = None,
) -> AsyncIterator[tuple[Mesh, Client]]:
    """The four services and the autoscaler (reading `config`), and a client once they answer. Nodes outlive the
    late heartbeats of a busy machine (`LASTING_NODES`, unless `settings` say otherwise): a launched node taken for
    dead would be replaced, and the launches and terminations the tests count would not be the autoscaler's."""
    env = {**FAST_AUTOSCALER, **LASTING_NODES, "CORRAL_AUTOSCALER_CONFIG": str(config), **(settings or {})}
    mesh = start_test_mesh(data_dir, server_path, (*SERVICES, "autoscaler"), env, metrics_from)
    try:
        async with Client(mesh.nats_url, timeout=10.0) as client:
            await wait_ready(client)
            await client.wait_autoscaler(timeout=15.0)
            yield mesh, client
    finally:
        mesh.close()


async def events_of(mesh: Mesh) -> list[AnyEvent]:
    """Every event of the mesh's log, in order."""
    bus = await Bus.connect(Settings.from_env(mesh.env), "test-reader")
    try:
        last = await bus.last_sequence()
        return await bus.read_to(last)
    finally:
        await bus.close()


def launch_requests(events: list[AnyEvent]) -> list[NodesLaunchRequested]:
    """The launches the autoscaler asked for."""
    return [event for event in events if isinstance(event, NodesLaunchRequested)]


@contextlib.contextmanager
def node_agents(folder: Path) -> Iterator[Path]:
    """A folder where a test's launch command writes the pid of each node agent it starts (`<launch id>.pid`, as
    `scripts/launch_node.py` does); every agent still running is killed on the way out (each runs in a session of
    its own, so nothing else stops it, and it would retry the gone mesh's NATS for ever)."""
    folder.mkdir()
    try:
        yield folder
    finally:
        for pid_file in folder.glob("*.pid"):
            with contextlib.suppress(ValueError, ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
