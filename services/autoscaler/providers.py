"""Who starts and stops the nodes the autoscaler launches: `local` (node agents in this process) or `command`
(a launch and a terminate command line, for a cloud CLI, `docker run` or `kubectl`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Callable
from typing import Protocol

from services.autoscaler.handlers import node_id_of
from services.client import Client
from services.core.autoscale import NodeType, ProviderConfig
from services.core.errors import CorralError

log = logging.getLogger("corral.autoscaler")

REGISTER_RETRY_S = 0.25
OUTPUT_KEPT = 500
"""Characters of a failed command's output kept in the failure's reason."""

Failed = Callable[[str, str], None]
"""Told (launch id, reason) when a provider fails a launch."""


class Provider(Protocol):
    """Starts a launch's node, resumes one after a restart, and stops it."""

    async def launch(self, launch_id: str, node_type: NodeType) -> None:
        """Start the node of a launch (or start it again after a restart: the same launch id)."""

    async def terminate(self, launch_id: str, node_type: NodeType, node_id: str) -> None:
        """Stop the node of a launch (`node_id` "" when it never registered)."""

    async def close(self) -> None:
        """Stop whatever this process runs."""


class LocalProvider:
    """Each launched node is a node agent inside this process (its own client: registration, heartbeats) until
    terminated. A launch started again after a restart registers the same node again, which resumes it."""

    def __init__(self, nats_url: str) -> None:
        self.nats_url = nats_url
        self.agents: dict[str, asyncio.Task[None]] = {}
        self.clients: dict[str, Client] = {}

    async def launch(self, launch_id: str, node_type: NodeType) -> None:
        """Start the agent (it registers as soon as the labels service answers)."""
        if launch_id not in self.agents:
            self.agents[launch_id] = asyncio.create_task(self._agent(launch_id, node_type))

    async def _agent(self, launch_id: str, node_type: NodeType) -> None:
        client = Client(self.nats_url, name=f"autoscaler-node-{launch_id}")
        self.clients[launch_id] = client
        node_id = node_id_of(node_type.name, launch_id)
        connected = False
        while True:
            try:
                if not connected:
                    await client.connect()
                    connected = True
                await client.register_node(
                    node_id,
                    dict(node_type.resources),
                    dict(node_type.labels),
                    list(node_type.taints),
                    node_type=node_type.name,
                    launch_id=launch_id,
                )
                log.info("launch %s: node %s registered", launch_id, node_id)
                return
            except CorralError as error:
                log.info("launch %s: not registered yet (%s); retrying", launch_id, error)
            await asyncio.sleep(REGISTER_RETRY_S)

    async def terminate(self, launch_id: str, node_type: NodeType, node_id: str) -> None:
        """Stop the agent: no more heartbeats."""
        agent = self.agents.pop(launch_id, None)
        if agent is not None:
            agent.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await agent
        client = self.clients.pop(launch_id, None)
        if client is not None:
            await client.close()

    async def close(self) -> None:
        """Stop every agent."""
        for launch_id in list(self.agents):
            await self.terminate(launch_id, NodeType(name="", resources={}), "")


class CommandProvider:
    """Runs the configured command lines (through `sh -c`) with the launch's facts in the environment:
    CORRAL_NODE_TYPE, CORRAL_LAUNCH_ID, CORRAL_NATS_URL, CORRAL_NODE_RESOURCES, CORRAL_NODE_LABELS and
    CORRAL_NODE_TAINTS (JSON), and CORRAL_NODE_ID for terminate. A launch command that exits non-zero fails the
    launch. A launch is run again with the same id after a restart: the command must be idempotent per launch id."""

    def __init__(self, config: ProviderConfig, nats_url: str, failed: Failed, timeout: float) -> None:
        self.config, self.nats_url, self.failed, self.timeout = config, nats_url, failed, timeout
        self.running: set[asyncio.Task[None]] = set()

    def environment(self, launch_id: str, node_type: NodeType, node_id: str = "") -> dict[str, str]:
        """The process environment plus the launch's facts."""
        taints = [{"key": t.key, "value": t.value, "effect": t.effect} for t in node_type.taints]
        return {
            **os.environ,
            "CORRAL_NODE_TYPE": node_type.name,
            "CORRAL_LAUNCH_ID": launch_id,
            "CORRAL_NATS_URL": self.nats_url,
            "CORRAL_NODE_RESOURCES": json.dumps(dict(node_type.resources)),
            "CORRAL_NODE_LABELS": json.dumps(dict(node_type.labels)),
            "CORRAL_NODE_TAINTS": json.dumps(taints),
            "CORRAL_NODE_ID": node_id,
        }

    async def launch(self, launch_id: str, node_type: NodeType) -> None:
        """Run the launch command in the background; its failure fails the launch."""
        task = asyncio.create_task(self._launch(launch_id, node_type))
        self.running.add(task)
        task.add_done_callback(self.running.discard)

    async def _launch(self, launch_id: str, node_type: NodeType) -> None:
        why = await self._run(self.config.launch, self.environment(launch_id, node_type))
        if why:
            log.warning("launch %s: %s", launch_id, why)
            self.failed(launch_id, f"the launch command {why}")

    async def terminate(self, launch_id: str, node_type: NodeType, node_id: str) -> None:
        """Run the terminate command (when one is configured) and wait for it."""
        if self.config.terminate:
            why = await self._run(self.config.terminate, self.environment(launch_id, node_type, node_id))
            if why:
                log.warning("terminate %s (node %s): the command %s", launch_id, node_id or "-", why)

    async def _run(self, command: str, env: dict[str, str]) -> str:
        """Run one command line; "" when it succeeded, else what went wrong (exit code and output tail)."""
        process = await asyncio.create_subprocess_shell(
            command, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        try:
            output, _ = await asyncio.wait_for(process.communicate(), timeout=self.timeout)
        except TimeoutError:
            process.kill()
            await process.wait()
            return f"did not finish within {self.timeout:g}s"
        if process.returncode:
            tail = output.decode(errors="replace").strip()[-OUTPUT_KEPT:]
            return f"exited with code {process.returncode}" + (f": {tail}" if tail else "")
        return ""

    async def close(self) -> None:
        """Stop waiting for running launch commands (they go on; their launches resume or time out)."""
        for task in list(self.running):
            task.cancel()


def provider_for(config: ProviderConfig, nats_url: str, failed: Failed, timeout: float) -> Provider:
    """The provider a configuration names."""
    if config.type == "command":
        return CommandProvider(config, nats_url, failed, timeout)
    return LocalProvider(nats_url)
