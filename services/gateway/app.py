"""The gateway's Litestar app: the routes, the client it asks through, the error answers; `main` serves it."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import uvicorn
from litestar import Litestar, Request, get
from litestar.datastructures import State
from litestar.di import Provide
from litestar.exceptions import HTTPException
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin, SwaggerRenderPlugin
from litestar.response import Redirect

from services.client import Client
from services.core.errors import CorralError
from services.gateway.backlog import Backlog
from services.gateway.cluster import cluster_router
from services.gateway.errors import bug, corral_error, http_error
from services.gateway.events import Watching, events
from services.gateway.feed import Feed
from services.gateway.health import healthz, readyz
from services.gateway.measure import measured
from services.gateway.reference import documented
from services.gateway.shield import shielded
from services.gateway.taints import taint_routers
from services.gateway.ui import ui_routers
from services.gateway.vclusters import vclusters_router
from services.gateway.watchers import watched
from services.runtime import telemetry
from services.runtime.runner import setup_logging
from services.runtime.settings import Settings, SettingsError

log = logging.getLogger("corral.gateway")

GRACE_SECONDS = 3
"""How long a stopping gateway lets open calls (event streams) finish before it closes them."""
SCHEMA_PATH = "/schema"
"""Where Litestar serves the OpenAPI document and its docs page."""


@get("/openapi.json", include_in_schema=False)
async def openapi(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """The OpenAPI document (also at /schema/openapi.json, where the docs page reads it)."""
    return request.app.openapi_schema.to_schema()


@get("/docs", include_in_schema=False)
async def docs() -> Redirect:
    """The interactive docs page (Swagger UI, served by Litestar)."""
    return Redirect(f"{SCHEMA_PATH}/swagger")


def client_of(state: State) -> Client:
    """The gateway's one connection to the bus."""
    return cast(Client, state.client)


def create_app(settings: Settings) -> Litestar:
    """The app: every route, the client connected for its lifetime, errors as JSON with the right status."""

    @asynccontextmanager
    async def connected(app: Litestar) -> AsyncIterator[None]:
        async with Client(settings.nats_url, name="corral-gateway") as client:
            app.state.client = client
            app.state.watching = Watching(Feed(client), Backlog(client))
            try:
                yield
            finally:
                await app.state.watching.feed.close()

    return documented(
        Litestar(
            route_handlers=[
                *ui_routers(),
                openapi,
                docs,
                healthz,
                readyz,
                events,
                cluster_router,
                vclusters_router,
                *taint_routers(),
            ],
            dependencies={"client": Provide(client_of, sync_to_thread=False)},
            exception_handlers={CorralError: corral_error, HTTPException: http_error, Exception: bug},
            lifespan=[connected],
            state=State({"token": settings.http_token}),
            request_max_body_size=settings.http_max_body_bytes,
            openapi_config=OpenAPIConfig(
                title="Corral",
                version="1",
                description="Corral's HTTP API: the cluster, pending work and why it waits, and the commands.",
                path=SCHEMA_PATH,
                render_plugins=[SwaggerRenderPlugin(), JsonRenderPlugin()],
            ),
        )
    )


def main() -> int:
    """Serve the API on `CORRAL_HTTP_HOST:CORRAL_HTTP_PORT` until SIGINT or SIGTERM."""
    try:
        settings = Settings.from_env()
        setup_logging(settings.log_level)
        telemetry.configure(settings, "gateway")
    except SettingsError as error:
        print(f"corral gateway: {error}", file=sys.stderr)
        return 2
    log.info("gateway listening on http://%s:%d/", settings.http_host, settings.http_port)
    uvicorn.run(
        measured(shielded(watched(create_app(settings), settings.http_max_watchers), settings)),
        host=settings.http_host,
        port=settings.http_port,
        log_level=settings.log_level.lower(),
        access_log=False,
        timeout_graceful_shutdown=GRACE_SECONDS,
    )
    return 0
