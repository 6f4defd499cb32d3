"""`--wait`: follow work until it is placed, or a virtual cluster until it is admitted, printing each new reason it
waits on the way. Events about the object wake each look (`WorkEvents`); a look a second catches what no event
announces."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from schemas import Placed
from schemas import subjects as s
from services.cli.common import CliError, say
from services.client import Client
from services.client.client import WorkKind
from services.client.deadlines import check, deadline_in
from services.client.work_events import WorkEvents

RECHECK = 1.0


async def wait_for(
    client: Client,
    about: tuple[str, str],
    look: Callable[[], Awaitable[tuple[bool, str]]],
    what: str,
    timeout: float,
) -> None:
    """Look until `look` says done, printing each new progress line it gives, again at each event about the object
    `about` (its log aggregate and id); `CliError` naming `what` after `timeout` seconds."""
    events = await WorkEvents.open(client.bus.nc, *about)
    last = ""
    deadline = deadline_in(timeout)
    try:
        async with asyncio.timeout_at(deadline):
            while True:
                check(deadline)
                done, line = await look()
                if done:
                    return
                if line != last:
                    say(line)
                    last = line
                await events.next(RECHECK)
    except TimeoutError:
        raise CliError(f"{what} still waits after {timeout:g}s: {last}") from None
    finally:
        await events.close()


async def wait_placed(client: Client, work_id: str, kind: WorkKind, timeout: float) -> Placed:
    """The decision once the actor (or placement group) is placed."""
    placed: list[Placed] = []

    async def look() -> tuple[bool, str]:
        decision = await client.decision(work_id, kind)
        if isinstance(decision, Placed):
            placed.append(decision)
            return True, ""
        return False, f"{work_id} pending: {decision.message}"

    aggregate = s.ACTOR if kind == "actor" else s.PLACEMENT_GROUP
    noun = "actor" if kind == "actor" else "placement group"
    await wait_for(client, (aggregate, work_id), look, f"{noun} {work_id}", timeout)
    return placed[0]


async def wait_admitted(client: Client, vc_id: str, timeout: float) -> list[str]:
    """The virtual nodes of the cluster once the scheduler admits it."""
    vnodes: list[str] = []

    async def look() -> tuple[bool, str]:
        info = await client.virtual_cluster(vc_id)
        if info.state == "admitted":
            vnodes.extend(node.node_id for node in info.nodes)
            return True, ""
        return False, f"{vc_id} {info.state}: {info.message}"

    await wait_for(client, (s.VNODE, vc_id), look, f"virtual cluster {vc_id}", timeout)
    return vnodes
