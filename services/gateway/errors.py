"""Errors as HTTP answers: the one exception tree mapped to status codes, and the guards of mutating routes."""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Sequence
from typing import Any

import msgspec
from litestar import Request, Response
from litestar.connection import ASGIConnection
from litestar.exceptions import HTTPException, NotAuthorizedException
from litestar.handlers import BaseRouteHandler, HTTPRouteHandler

from services.core.errors import (
    CodecError,
    ConflictError,
    CorralError,
    NotFoundError,
    RejectedError,
    StorageFullError,
    TooLargeError,
)
from services.gateway.measure import Send
from services.runtime.codec import decode

log = logging.getLogger("corral.gateway")

JSON_TYPES = ("application/json",)
HTTP_KINDS = {401: "unauthorized", 404: "not_found", 405: "not_allowed", 409: "conflict"}
"""The `kind` of Litestar's own refusals ("invalid" for the others)."""


class ApiError(msgspec.Struct, frozen=True, omit_defaults=True):
    """What every failed call answers: the message (the field, the value and the rule for a refusal), its kind, the
    status code, any details the request's checks gave, and the service that did not answer (a 503)."""

    error: str
    kind: str
    status: int
    details: list[Any] = []
    service: str = ""


SUBJECT = re.compile(r"\bcorral\.(cmd|q|req)\.([a-z]+)")
"""A bus subject in an error's text: a command or query names its service; every request goes to the scheduler."""


def service_in(message: str) -> str:
    """The service an unavailable error's subject names ("" when it names none)."""
    found = SUBJECT.search(message)
    if found is None:
        return ""
    return "scheduler" if found.group(1) == "req" else found.group(2)


def status_of(error: CorralError) -> int:
    """A Corral error's status code: 404 unknown id, 409 conflict, 413 too large, 400 refused, 507 no room in the
    event log or the request queue, 503 unavailable."""
    refusals = ((NotFoundError, 404), (ConflictError, 409), (TooLargeError, 413), (RejectedError, 400))
    for kind, status in (*refusals, (StorageFullError, 507)):
        if isinstance(error, kind):
            return status
    return 503


def corral_error(_request: Request[Any, Any, Any], error: CorralError) -> Response[ApiError]:
    """A refusal (4xx), a store without room (507) or a service that did not answer (503), with the message."""
    status = status_of(error)
    service = service_in(str(error)) if status == 503 else ""
    return Response(ApiError(str(error), error.kind, status, service=service), status_code=status)


def http_error(request: Request[Any, Any, Any], error: HTTPException) -> Response[ApiError]:
    """Litestar's own refusals (malformed JSON, wrong types, unknown fields, oversized bodies, unknown routes) in
    the same shape; the details name where the body is wrong. A 500 among them is a bug (see `bug`)."""
    if error.status_code >= 500:
        return bug(request, error)
    extra = error.extra if isinstance(error.extra, list) else [error.extra] if error.extra else []
    wrong = "; ".join(str(item.get("message", item)) if isinstance(item, dict) else str(item) for item in extra)
    message = f"{error.detail}: {wrong}" if wrong else error.detail
    kind = HTTP_KINDS.get(error.status_code, "invalid")
    return Response(
        ApiError(message, kind, error.status_code, extra), status_code=error.status_code, headers=error.headers
    )


def bug(request: Request[Any, Any, Any], error: Exception) -> Response[ApiError]:
    """Any other exception is a bug of the gateway: logged with its trace, answered 500 (never a refusal)."""
    log.error("%s %s failed", request.method, escaped(request.url.path), exc_info=error)
    message = f"the gateway failed on this call ({type(error).__name__}); its log has the trace"
    return Response(ApiError(message, "failed", 500), status_code=500)


def escaped(sent: str, limit: int = 300) -> str:
    """What a client sent, fit for one log line: control and non-ASCII characters escaped (a CR or LF in a path
    would forge a line of the log), cut at `limit` characters."""
    shown = ascii(sent[:limit])[1:-1]
    return shown + "..." if len(sent) > limit else shown


async def send_error(send: Send, error: ApiError, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    """Answer `error` as JSON on a plain ASGI `send` (for the guards in front of Litestar)."""
    body = msgspec.json.encode(error)
    length = str(len(body)).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", length), *headers]
    await send({"type": "http.response.start", "status": error.status, "headers": head})
    await send({"type": "http.response.body", "body": body})


def token_matches(token: str, given: str | None) -> bool:
    """Whether a call may change the cluster: the gateway has no token, or `given` is it."""
    if not token:
        return True
    return given is not None and secrets.compare_digest(given.strip().encode(), token.encode())


def require_token(connection: ASGIConnection[Any, Any, Any, Any], _handler: BaseRouteHandler) -> None:
    """A guard: `Authorization: Bearer <token>` when the gateway has a token (401 otherwise); open without one."""
    scheme, _, given = connection.headers.get("authorization", "").partition(" ")
    if not token_matches(connection.app.state.token, given if scheme.lower() == "bearer" else None):
        raise NotAuthorizedException(
            "this call changes the cluster: send Authorization: Bearer <token> (the gateway's CORRAL_HTTP_TOKEN)",
            headers={"WWW-Authenticate": "Bearer"},
        )


async def json_body(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    """A guard: the body must be JSON (`Content-Type: application/json`, else 415; malformed, 400) that the bus's
    codec reads as the route's type (else 422 naming the type, where and why), before Litestar decodes it.

    The codec bounds the nesting depth and checks amounts as every service does: Litestar's own decoding
    recurses on deeply nested arrays (a 500), and would let a NaN through to the service."""
    media = connection.headers.get("content-type", "").split(";")[0].strip().lower()
    if media not in JSON_TYPES and not media.endswith("+json"):
        shown = media or "(none)"
        raise HTTPException(status_code=415, detail=f"Content-Type {shown!r}: the body must be application/json")
    assert isinstance(connection, Request) and isinstance(handler, HTTPRouteHandler)
    body = await connection.body()
    try:
        decode(body, handler.parsed_fn_signature.parameters["data"].annotation, max_bytes=len(body))
    except CodecError as error:
        decode(body, Any, max_bytes=len(body))  # not JSON at all: the CodecError of that, a 400
        raise HTTPException(status_code=422, detail=str(error)) from None


CHANGES = [require_token]
"""The guards of a mutating route without a body."""
CHANGES_WITH_BODY = [require_token, json_body]
"""The guards of a mutating route with a JSON body: the token first, then the content type."""
