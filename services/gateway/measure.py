"""The gateway's requests counted and timed by route template, method and status (`metrics.gateway_request`)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from services.runtime import metrics

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]
"""Plain ASGI, as uvicorn calls it (Litestar's own scope types are narrower)."""

UNMATCHED = "(unmatched)"
"""The route label of a request no route matched (a 404): raw paths would make the label unbounded."""


def measured(app: Any) -> ASGIApp:
    """`app` with each HTTP request recorded once its answer starts (the status the caller saw, errors included)."""

    async def measuring(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        started = time.perf_counter()

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                route = str(scope.get("path_template") or UNMATCHED)
                metrics.gateway_request(route, scope["method"], message["status"], time.perf_counter() - started)
            await send(message)

        await app(scope, receive, sending)

    return measuring
