"""Who starts and stops the nodes the autoscaler launches: `local` (node agents in this process) or `command`
(a launch and a terminate command line, for a cloud CLI, `docker run` or `kubectl`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from collections.abc import Callable
from typing import Protocol

from services.autoscaler.handlers import node_id_of
from services.autoscaler.output import Output
from services.client import Client
from services.core.autoscale import NodeType, ProviderConfig
from services.core.errors import CorralError

log = logging.getLogger("corral.autoscaler")

REGISTER_RETRY_S = 0.25
KILL_WAIT_S = 5.0
"""How long a command is waited for once its process group is killed (after that it is left to the system)."""

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
    CORRAL_NODE_TAINTS (JSON), and CORRAL_NODE_ID for terminate. A launch command that exits non-zero, or does not
    finish within the timeout, fails the launch. A launch is run again with the same id after a restart: the
    command must be idempotent per launch id.

    Each command runs in a process group of its own: one that does not finish (exit, and every process holding its
    output close it) within the timeout is killed with the whole group, as is one still running when its launch is
    terminated or the autoscaler stops. Its output is read as it comes and kept bounded (see `output`)."""

    def __init__(self, config: ProviderConfig, nats_url: str, failed: Failed, timeout: float) -> None:
        self.config, self.nats_url, self.failed, self.timeout = config, nats_url, failed, timeout
        self.running: dict[str, asyncio.Task[None]] = {}
        """Launch id -> its launch command, while it runs."""

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
        if launch_id in self.running:
            return
        task = asyncio.create_task(self._launch(launch_id, node_type))
        self.running[launch_id] = task
        task.add_done_callback(lambda done: self._forget(launch_id, done))

    def _forget(self, launch_id: str, done: asyncio.Task[None]) -> None:
        if self.running.get(launch_id) is done:
            del self.running[launch_id]

    async def _launch(self, launch_id: str, node_type: NodeType) -> None:
        why = await self._run(self.config.launch, self.environment(launch_id, node_type))
        if why:
            log.warning("launch %s: %s", launch_id, why)
            self.failed(launch_id, f"the launch command {why}")

    async def terminate(self, launch_id: str, node_type: NodeType, node_id: str) -> None:
        """Stop the launch command if it still runs (killing its process group), then run the terminate command
        (when one is configured) and wait for it."""
        launching = self.running.pop(launch_id, None)
        if launching is not None:
            launching.cancel()
            await asyncio.wait({launching})
        if self.config.terminate:
            why = await self._run(self.config.terminate, self.environment(launch_id, node_type, node_id))
            if why:
                log.warning("terminate %s (node %s): the command %s", launch_id, node_id or "-", why)

    async def _run(self, command: str, env: dict[str, str]) -> str:
        """Run one command line; "" when it succeeded, else what went wrong (exit code or timeout, and its output
        as `output.Output.note` tells it)."""
        reading, writing = os.pipe()  # not asyncio's pipes: waiting for the process never waits for its output
        try:
            process = await asyncio.create_subprocess_shell(
                command,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=writing,
                stderr=writing,
                start_new_session=True,
            )
        except BaseException:
            os.close(reading)
            raise
        finally:
            os.close(writing)
        pipe, output = await asyncio.get_running_loop().connect_read_pipe(Output, os.fdopen(reading, "rb", 0))
        finished = False
        try:
            async with asyncio.timeout(self.timeout):
                await output.closed
                code = await process.wait()
            finished = True
        except TimeoutError:
            why = f"did not finish within {self.timeout:g}s (killed, with every process it started)"
        finally:
            pipe.close()
            if not finished:
                await _kill_group(process)
        if finished:
            if not code:
                return ""
            why = f"exited with code {code}"
        said = output.note()
        return f"{why}: {said}" if said else why

    async def close(self) -> None:
        """Stop the running launch commands (their process groups are killed; the launches resume after a restart,
        or time out)."""
        running = list(self.running.values())
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running)


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    """Kill the command's process group (whatever it started and left running too) and wait, at most
    `KILL_WAIT_S`, for the command itself to end."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), KILL_WAIT_S)


def provider_for(config: ProviderConfig, nats_url: str, failed: Failed, timeout: float) -> Provider:
    """The provider a configuration names."""
    if config.type == "command":
        return CommandProvider(config, nats_url, failed, timeout)
    return LocalProvider(nats_url)
