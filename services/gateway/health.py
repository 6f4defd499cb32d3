"""`/healthz` (the process answers) and `/readyz` (every service answers; 503 naming those that do not)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import msgspec
from litestar import Response, get

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
    """Whether every service answers, and each service's answer ("ok" or why not)."""

    ready: bool
    services: dict[str, str]
    error: str = ""


@get("/healthz", tags=["health"])
async def healthz() -> dict[str, str]:
    """The gateway process is up."""
    return {"status": "ok"}


@get("/readyz", tags=["health"])
async def readyz(client: Client) -> Response[Readiness]:
    """200 when every service answers; 503 naming the services that do not."""
    answers = await asyncio.gather(*(check(client) for check in CHECKS.values()), return_exceptions=True)
    services = {
        name: str(answer) if isinstance(answer, CorralError) else "ok"
        for name, answer in zip(CHECKS, answers, strict=True)
    }
    for answer in answers:
        if isinstance(answer, BaseException) and not isinstance(answer, CorralError):
            raise answer
    down = [name for name, said in services.items() if said != "ok"]
    error = f"not answering: {', '.join(down)}" if down else ""
    return Response(Readiness(not down, services, error), status_code=503 if down else 200)
