"""`/healthz` (the process answers) and `/readyz` (every service answers; 503 naming those that do not; stale
snapshots are a warning, not unreadiness: Redis is optional)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import msgspec
from litestar import Response, get

from schemas.queries import HealthReply
from services.client import Client
from services.core.errors import CorralError

CHECKS: dict[str, Callable[[Client], Awaitable[object]]] = {
    "scheduler": lambda client: client.status(limit=1),
    "labels": lambda client: client.nodes(limit=1),
    "taints": lambda client: client.taints(limit=1),
    "vclusters": lambda client: client.virtual_clusters(limit=1),
}
"""One query per service the gateway needs."""


class Readiness(msgspec.Struct, frozen=True):
    """Whether every service answers, and each service's answer ("ok" or why not); `snapshots`: per service "ok",
    "stale: <why saves fail>" or "unknown" (it did not say), and `warning` naming the stale ones."""

    ready: bool
    services: dict[str, str]
    error: str = ""
    snapshots: dict[str, str] = msgspec.field(default_factory=dict)
    warning: str = ""


@get("/healthz", tags=["health"])
async def healthz() -> dict[str, str]:
    """The gateway process is up."""
    return {"status": "ok"}


@get("/readyz", tags=["health"])
async def readyz(client: Client) -> Response[Readiness]:
    """200 when every service answers; 503 naming the services that do not. Stale snapshots (saves failing) are
    reported as a warning and leave the answer 200."""
    answers, healths = await asyncio.gather(
        asyncio.gather(*(check(client) for check in CHECKS.values()), return_exceptions=True),
        asyncio.gather(*(client.health(name) for name in CHECKS), return_exceptions=True),
    )
    services = {
        name: str(answer) if isinstance(answer, CorralError) else "ok"
        for name, answer in zip(CHECKS, answers, strict=True)
    }
    for answer in answers:
        if isinstance(answer, BaseException) and not isinstance(answer, CorralError):
            raise answer
    snapshots = {name: _snapshots(health) for name, health in zip(CHECKS, healths, strict=True)}
    down = [name for name, said in services.items() if said != "ok"]
    error = f"not answering: {', '.join(down)}" if down else ""
    stale = [name for name, said in snapshots.items() if said.startswith("stale")]
    warning = f"snapshots stale: {', '.join(stale)}" if stale else ""
    return Response(Readiness(not down, services, error, snapshots, warning), status_code=503 if down else 200)


def _snapshots(health: HealthReply | BaseException) -> str:
    """A service's snapshots in a word or two: "ok", "stale: <why>", or "unknown" when it did not say."""
    if isinstance(health, CorralError):
        return "unknown"
    if isinstance(health, BaseException):
        raise health
    return f"stale: {health.snapshots_failing}" if health.snapshots_failing else "ok"
