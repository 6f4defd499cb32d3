"""A service that fails on a message says so, and the client and the CLI report the service failing: never a
`RejectedError`, which tells the user their request was wrong. A refusal still reaches them as a refusal.

Real NATS; the failing handlers are served the way every service serves its commands (the runtime's desk).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from schemas import subjects as s
from schemas.commands import RemoveNode, SetLabels
from services.client import Client, NotFoundError, RejectedError, ServiceFailedError
from services.local.mesh import Mesh
from services.runtime.bus import Bus
from services.runtime.commands import CommandDesk, Outcome
from services.runtime.settings import Settings
from tests.integration.conftest import start_test_mesh
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


KNOWN: dict[str, Outcome] = {}


def buggy(command: SetLabels) -> Outcome:
    """A handler with a bug: a lookup it never guarded."""
    return KNOWN[command.node_id]


def refusing(command: RemoveNode) -> Outcome:
    raise NotFoundError(f"node_id {command.node_id!r}: no such node")


@pytest.fixture
async def servers(tmp_path: Path, server_path: ServerPath) -> AsyncIterator[Mesh]:
    """nats-server and redis-server, with the labels service's command subjects served by handlers that fail or
    refuse (no handler here gets as far as appending, so the desk needs no log)."""
    mesh = start_test_mesh(tmp_path / "mesh", server_path, services=())
    settings = Settings(**{**Settings.from_env().__dict__, "nats_url": mesh.nats_url})
    try:
        bus = await Bus.connect(settings, "labels", timeout=10.0)
        desk = CommandDesk(bus, cast(Any, None), "labels")
        try:
            await bus.serve(s.SET_LABELS, desk.handler(SetLabels, buggy), queue="labels")
            await bus.serve(s.REMOVE_NODE, desk.handler(RemoveNode, refusing), queue="labels")
            yield mesh
        finally:
            await bus.close()
    finally:
        mesh.close()


async def test_a_handler_bug_reaches_the_client_as_the_service_failing(servers: Mesh) -> None:
    async with Client(servers.nats_url, timeout=5.0) as client:
        with pytest.raises(ServiceFailedError, match=r"the service failed on this message \(KeyError: 'n1'\)") as bug:
            await client.set_labels("n1", {"tier": "a"})
        assert not isinstance(bug.value, RejectedError | ValueError)
        with pytest.raises(NotFoundError, match="node_id 'n1': no such node"):
            await client.remove_node("n1")


async def test_the_cli_says_the_service_failed_not_that_it_refused(servers: Mesh) -> None:
    command = [sys.executable, "-m", "services.cli", "label", "--node-id", "n1", "tier=a"]
    done = await anyio.run_process([*command, "--nats-url", servers.nats_url, "--timeout", "5"], check=False)
    assert done.returncode == 1
    err = done.stderr.decode()
    assert "corral label: error: the labels service could not serve it: the service failed on this message" in err
    assert "refused" not in err
