"""The OpenAPI document as the API behaves: each route's error answers (`ApiError`: `{error, kind, status}`) with the
status codes it can give, and the bearer scheme on the routes that change the cluster.

Litestar documents every route with 200 and its own `{status_code, detail, extra}` 400; the gateway answers
otherwise (errors.py), so the document is rewritten from what each route is: its method, its path parameters, its
guards."""

from __future__ import annotations

from http import HTTPStatus

from litestar import Litestar
from litestar.handlers import HTTPRouteHandler
from litestar.openapi.spec import (
    Components,
    OpenAPI,
    OpenAPIMediaType,
    OpenAPIResponse,
    Reference,
    Schema,
    SecurityScheme,
)
from litestar.routes import HTTPRoute

from services.gateway.errors import ApiError, json_body, require_token

BEARER = "bearer"
"""The security scheme's name: `Authorization: Bearer <CORRAL_HTTP_TOKEN>` on the routes that change the cluster."""
ERROR_SCHEMA = Schema(
    type="object",  # type: ignore[arg-type]  # the OpenAPI type's value
    required=["error", "kind", "status"],
    properties={
        "error": Schema(type="string", description="what went wrong: the field, the value and the rule"),  # type: ignore[arg-type]
        "kind": Schema(
            type="string",  # type: ignore[arg-type]
            description="invalid, not_found, conflict, too_large, unauthorized, unavailable, storage_full, failed, ...",
        ),
        "status": Schema(type="integer", description="the HTTP status code again"),  # type: ignore[arg-type]
        "details": Schema(type="array", items=Schema(), description="where a body is wrong, when known"),  # type: ignore[arg-type]
        "service": Schema(type="string", description="the service that did not answer (a 503)"),  # type: ignore[arg-type]
    },
    description=ApiError.__doc__,
)
MEANINGS = {
    400: "refused: a bad value (the message names the field, the value and the rule)",
    401: "this call changes the cluster: send Authorization: Bearer <token>",
    404: "no such node, actor, placement group, virtual cluster, label or taint",
    409: "conflicts with what is live (an id resubmitted with another request, a label without --overwrite)",
    413: "the body is over the gateway's limit",
    415: "the body is not application/json",
    422: "the body does not read as the route's type (the message says where and why)",
    500: "a bug of the gateway (its log has the trace)",
    503: "a service did not answer (`service` names it)",
    507: "the event log or the request queue has no room",
}
BUS_FREE = ("/healthz",)
"""Routes that answer without asking a service."""


def error_codes(path: str, handler: HTTPRouteHandler) -> list[int]:
    """The error statuses a route can answer, from its guards, its path and its method."""
    guards = handler.guards or []
    writes = require_token in guards
    codes = {500} if path in BUS_FREE else {500, 503}
    if handler.parsed_fn_signature.parameters.keys() - {"client", "data", "request"} or writes:
        codes.add(400)  # a query or header value refused (a bad selector), or a command refused
    if "{" in path:
        codes.add(404)
    if writes:
        codes |= {401, 409, 507}
    if json_body in guards:
        codes |= {400, 413, 415, 422}
    if path == "/readyz":
        codes.discard(503)  # its 503 is its own answer (Readiness), documented with its 200
    return sorted(codes)


def rewrite(document: OpenAPI, app: Litestar) -> None:
    """Replace Litestar's error answers with the gateway's, per route, and declare the bearer scheme where it is
    asked."""
    components = document.components if isinstance(document.components, Components) else Components()
    components.schemas = {**(components.schemas or {}), "ApiError": ERROR_SCHEMA}
    components.security_schemes = {
        BEARER: SecurityScheme(type="http", scheme="bearer", description="CORRAL_HTTP_TOKEN, when the gateway has one")
    }
    document.components = components
    error = {"application/json": OpenAPIMediaType(schema=Reference("#/components/schemas/ApiError"))}
    for route in app.routes:
        path = route.path_format  # `/actors/{actor_id}`, as the document names it
        if not isinstance(route, HTTPRoute) or path not in (document.paths or {}):
            continue
        item = document.paths[path]  # type: ignore[index]
        for handler in route.route_handlers:
            for method in handler.http_methods:
                operation = getattr(item, method.lower(), None)
                if operation is None:
                    continue
                kept = {code: answer for code, answer in (operation.responses or {}).items() if code.startswith("2")}
                if path == "/readyz":
                    kept["503"] = OpenAPIResponse(description="a service does not answer", content=kept["200"].content)
                for code in error_codes(path, handler):
                    kept[str(code)] = OpenAPIResponse(
                        description=MEANINGS.get(code, HTTPStatus(code).phrase), content=error
                    )
                operation.responses = kept
                if require_token in (handler.guards or []):
                    operation.security = [{BEARER: []}]


def documented(app: Litestar) -> Litestar:
    """`app` with its OpenAPI document rewritten (built now, once: every route is known)."""
    rewrite(app.openapi_schema, app)
    return app
