"""What every answer of the gateway carries, and the names it answers to: a browser may not frame the page or run
another site's script or style in it, and a gateway without a token answers only to its own names in `Host` (a
page of another site whose name was rebound to this address would otherwise drive it)."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from services.gateway.errors import ApiError, send_error
from services.gateway.measure import ASGIApp, Message, Receive, Send
from services.runtime.settings import Settings

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
"""The names a gateway without a token always answers to."""
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; connect-src 'self'; "
    "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""Only the page's own script and stylesheet run; the page's server-rendered style attributes (bar widths,
indents: numbers, no script can run from them) are kept."""
SECURITY_HEADERS = [
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
]
UNPOLICED_PREFIX = "/schema"
"""The interactive API docs (Litestar's Swagger UI) load their script from a CDN: no Content-Security-Policy there."""
WRONG_HOST = 421


def allowed_hosts(settings: Settings) -> frozenset[str]:
    """The `Host` names a gateway without a token answers to: loopback, `http_host` and `http_allowed_hosts`."""
    names = {*LOOPBACK_NAMES, settings.http_host, *settings.http_allowed_hosts}
    return frozenset(bracketed(name).lower() for name in names if name)


def bracketed(name: str) -> str:
    """An IPv6 address as `Host` writes it (in brackets)."""
    return f"[{name}]" if ":" in name and not name.startswith("[") else name


def host_name(host: str) -> str:
    """The name of a `Host` value, without its port."""
    if host.startswith("["):
        return host[: host.find("]") + 1].lower()
    return host.rsplit(":", 1)[0].lower() if host.count(":") == 1 else host.lower()


def shielded(app: Any, settings: Settings) -> ASGIApp:
    """`app` with the security headers on every answer, and, without a token, a `Host` of another name refused."""
    hosts = None if settings.http_token else allowed_hosts(settings)

    async def shielding(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = [*SECURITY_HEADERS]
        if not str(scope["path"]).startswith(UNPOLICED_PREFIX):
            headers.append((b"content-security-policy", CONTENT_SECURITY_POLICY.encode()))

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *headers]
            await send(message)

        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if hosts is not None and host and host_name(host) not in hosts:
            await refuse_host(sending, host, hosts)
            return
        await app(scope, receive, sending)

    return shielding


async def refuse_host(send: Send, host: str, hosts: frozenset[str]) -> None:
    """421 naming the names this gateway answers to."""
    message = (
        f"Host {host!r}: a gateway without a token answers only to {', '.join(sorted(hosts))} "
        "(CORRAL_HTTP_ALLOWED_HOSTS adds names; CORRAL_HTTP_TOKEN lifts this check)"
    )
    await send_error(send, ApiError(message, "invalid", WRONG_HOST))
