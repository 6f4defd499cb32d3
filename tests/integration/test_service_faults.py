"""A service that fails on a message says so, and the client and the CLI report the service failing: never a
`RejectedError`, which tells the user their request was wrong. A refusal still reaches them as a refusal.

Real NATS; the failing handlers are served the way every service serves its commands (the runtime's desk).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from schemas import subjects as s
from schemas.commands import RemoveNode, SetLabels
from services.cli.mesh import Mesh
from services.client import Client, NotFoundError, RejectedError, ServiceFailedError
from services.runtime.bus import Bus
from services.runtime.commands import CommandDesk, Outcome
from services.runtime.servers import ServerPath
from services.runtime.settings import Settings
from tests.integration.conftest import start_test_mesh

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.fixture
def servers(tmp_path: Path, server_path: ServerPath) -> Iterator[Mesh]:
    """nats-server and redis-server, no services."""
    running = start_test_mesh(tmp_path / "mesh", server_path, services=())
    try:
        yield running
    finally:
        running.close()


KNOWN: dict[str, Outcome] = {}


def buggy(command: SetLabels) -> Outcome:
    """A handler with a bug: a lookup it never guarded."""
    return KNOWN[command.node_id]


def refusing(command: RemoveNode) -> Outcome:
    raise NotFoundError(f"node_id {command.node_id!r}: no such node")


@pytest.fixture
async def labels_service(servers: Mesh) -> AsyncIterator[None]:
    """The labels service's command subjects served by handlers that fail or refuse (nothing is appended)."""
    settings = Settings(**{**Settings.from_env().__dict__, "nats_url": servers.nats_url})
    bus = await Bus.connect(settings, "labels", timeout=10.0)
    desk = CommandDesk(bus, cast(Any, None), "labels")  # never reached: no handler here gets as far as appending
    await bus.serve(s.SET_LABELS, desk.handler(SetLabels, buggy), queue="labels")
    await bus.serve(s.REMOVE_NODE, desk.handler(RemoveNode, refusing), queue="labels")
    try:
        yield
    finally:
        await bus.close()


@pytest.mark.usefixtures("labels_service")
async def test_a_handler_bug_reaches_the_client_as_the_service_failing(servers: Mesh) -> None:
    async with Client(servers.nats_url, timeout=5.0) as client:
        with pytest.raises(ServiceFailedError, match=r"the service failed on this message \(KeyError: 'n1'\)") as bug:
            await client.set_labels("n1", {"tier": "a"})
        assert not isinstance(bug.value, RejectedError | ValueError)
        with pytest.raises(NotFoundError, match="node_id 'n1': no such node"):
            await client.remove_node("n1")


@pytest.mark.usefixtures("labels_service")
async def test_the_cli_says_the_service_failed_not_that_it_refused(servers: Mesh) -> None:
    command = [sys.executable, "-m", "services.cli", "label", "--node-id", "n1", "tier=a"]
    done = await anyio.run_process([*command, "--nats-url", servers.nats_url, "--timeout", "5"], check=False)
    assert done.returncode == 1
    err = done.stderr.decode()
    assert "corral label: error: the labels service could not serve it: the service failed on this message" in err
    assert "refused" not in err
