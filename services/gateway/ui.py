"""The web page's routes: `/` (the page, or the route index as JSON to a caller that asks for JSON), the
server-rendered sections as HTML fragments under `/ui/` (a node's detail at `/ui/detail?node=`), the nodes an
event named as JSON (`/ui/data/nodes?id=`), the taint forms of a browser without the script, and the static
files."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlsplit

import msgspec
from litestar import MediaType, Request, Response, get, post
from litestar.enums import RequestEncodingType
from litestar.exceptions import NotFoundException, PermissionDeniedException
from litestar.params import Body, Parameter
from litestar.response import Redirect

from schemas.queries import AutoscalerStatusReply
from services.client import Client
from services.core.errors import CorralError, UnavailableError
from services.gateway import page
from services.gateway.cluster import NodeView, nodes_of
from services.gateway.errors import token_matches
from services.gateway.parsing import taints_of
from services.gateway.taints import delete_taints_in
from services.gateway.vclusters import tree_of

EVENTS_SHOWN = 15
"""A node's newest events its detail view lists."""
STATIC = Path(__file__).parent / "static"
STATIC_TYPES = {"page.css": "text/css; charset=utf-8", "page.js": "text/javascript; charset=utf-8"}
"""The page's static files, the only ones served, and their media types."""
STATIC_FILES = {name: (STATIC / name).read_bytes() for name in STATIC_TYPES}
"""The page's stylesheet and script."""


async def autoscaler_or_none(client: Client) -> AutoscalerStatusReply | None:
    """The autoscaler's status, or None when none runs."""
    try:
        return await client.autoscaler_status()
    except UnavailableError:
        return None


async def summary(client: Client) -> str:
    """The summary: nodes by state, resources, pending by first reason, the autoscaler."""
    nodes, pending, autoscaler = await asyncio.gather(nodes_of(client), client.pending(), autoscaler_or_none(client))
    return page.summary_section(nodes, pending, autoscaler)


async def detail(client: Client, node_id: str, token_required: bool) -> str:
    """One node's detail: the node, the actors placed on it and its newest events."""
    if not node_id:
        return page.detail_section(None, "", [], [], token_required)
    nodes, placements, history = await asyncio.gather(
        nodes_of(client), client.placements(), client.history(node_id=node_id)
    )
    node = next((node for node in nodes if node.node_id == node_id), None)
    actors = sorted(actor for actor, where in placements.items() if where == node_id)
    events = [(event.sequence, event.type, event.meaning) for event in reversed(history[-EVENTS_SHOWN:])]
    return page.detail_section(node, node_id, actors, events, token_required)


async def section(client: Client, name: str, token_required: bool, node_id: str = "") -> str:
    """One section's body, read from the services now."""
    if name == "summary":
        return await summary(client)
    if name == "nodes":
        return page.node_links(await nodes_of(client))
    if name == "detail":
        return await detail(client, node_id, token_required)
    if name == "actors":
        return '<p class="muted">The actor table needs the script: <a href="/api/v1/actors">/api/v1/actors</a>.</p>'
    if name == "pending":
        return page.pending_section(await client.pending())
    if name == "groups":
        return page.groups_section(await client.placement_groups())
    if name == "vclusters":
        return page.vclusters_section(await tree_of(client))
    raise NotFoundException(f"no section {name!r}: one of {', '.join(page.SERVER_SECTIONS)}")


async def section_or_why_not(client: Client, name: str, token_required: bool, node_id: str = "") -> str:
    """One section's body, or which service did not answer for it (the rest of the page still shows)."""
    try:
        return await section(client, name, token_required, node_id)
    except UnavailableError as error:
        return page.unavailable(str(error))


def html(text: str) -> Response[str]:
    """An HTML answer the browser must not cache (it is the cluster now)."""
    return Response(text, media_type=MediaType.HTML, headers={"Cache-Control": "no-store"})


def token_required(request: Request[Any, Any, Any]) -> bool:
    """Whether changes need the gateway's token."""
    return bool(request.app.state.token)


def wants_json(request: Request[Any, Any, Any]) -> bool:
    """A caller that asks for JSON and not for HTML (curl, scripts) gets the route index at `/`."""
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


def route_index(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """What this gateway serves: its routes, the OpenAPI document, the docs page and the web page."""
    routes = sorted(
        f"{method} {route.path}"
        for route in request.app.routes
        for method in route.methods
        if method not in ("HEAD", "OPTIONS")
    )
    return {"service": "corral gateway", "page": "/", "openapi": "/openapi.json", "docs": "/docs", "routes": routes}


@get("/api/v1", include_in_schema=False)
async def api_index(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """The route index."""
    return route_index(request)


def or_why_not(render: Callable[..., str], *reads: Any) -> str:
    """A section rendered from what was read, or which service did not answer for it (the rest still shows)."""
    for read in reads:
        if isinstance(read, UnavailableError):
            return page.unavailable(str(read))
        if isinstance(read, BaseException):
            raise read
    return render(*reads)


def embedded(nodes: list[NodeView] | BaseException) -> str:
    """The nodes as JSON the page carries for its table, without their layers (the detail view shows them): a
    data block, `<` escaped so that no tag can end it."""
    if isinstance(nodes, BaseException):
        return "null"
    slim = [msgspec.structs.replace(node, layers=None) for node in nodes]
    return msgspec.json.encode(slim).decode().replace("<", "\\u003c")


@get("/", include_in_schema=False)
async def home(request: Request[Any, Any, Any], client: Client, error: str = "", node: str = "") -> Response[Any]:
    """The page: every section rendered here from one reading of each listing (it reads well without the
    script), the nodes as JSON for the script's table, the event stream's start, `node` in the detail view, and
    `error` (what a form post of the page was refused for) on top."""
    if wants_json(request):
        return Response(route_index(request))
    required = token_required(request)
    since = await client.bus.last_sequence() + 1  # read first: an event after it and before the sections is sent
    nodes, pending, autoscaler, groups, tree, detail = await asyncio.gather(
        nodes_of(client),
        client.pending(),
        autoscaler_or_none(client),
        client.placement_groups(),
        tree_of(client),
        section_or_why_not(client, "detail", required, node),
        return_exceptions=True,
    )
    sections = {
        "summary": or_why_not(page.summary_section, nodes, pending, autoscaler),
        "nodes": or_why_not(page.node_links, nodes),
        "detail": or_why_not(str, detail),
        "pending": or_why_not(page.pending_section, pending),
        "actors": await section(client, "actors", required),
        "groups": or_why_not(page.groups_section, groups),
        "vclusters": or_why_not(page.vclusters_section, tree),
    }
    return html(
        page.page(sections, token_required=required, since=since, node_id=node, nodes=embedded(nodes), error=error)
    )


@get("/ui/{name:str}", include_in_schema=False)
async def fragment(request: Request[Any, Any, Any], client: Client, name: str, node: str = "") -> Response[str]:
    """One section's body, what the script swaps in after an event changed it (`detail`: of `node`)."""
    if name not in (*page.SERVER_SECTIONS, "detail"):
        raise NotFoundException(f"no section {name!r}: one of {', '.join((*page.SERVER_SECTIONS, 'detail'))}")
    return html(await section(client, name, token_required(request), node))


@get("/ui/data/nodes", include_in_schema=False)
async def some_nodes(client: Client, node_id: Annotated[list[str], Parameter(query="id")]) -> list[NodeView]:
    """The live nodes among these ids (`?id=a&id=b`), with their state: what the script fetches after events
    named them (an id not answered is a node gone)."""
    wanted = set(node_id)
    return [node for node in await nodes_of(client) if node.node_id in wanted]


class TaintForm(msgspec.Struct, frozen=True):
    """A taint form of the page: the node, the taint and, without the script, the token."""

    node_id: str
    key: str
    value: str = ""
    effect: str = "NoSchedule"
    token: str = ""


Form = Annotated[TaintForm, Body(media_type=RequestEncodingType.URL_ENCODED)]


def same_origin(request: Request[Any, Any, Any]) -> None:
    """A form post from another site's page is refused (403): without a token the gateway would obey it."""
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host", ""):
        raise PermissionDeniedException(f"Origin {origin!r}: the page's forms post only from this gateway's page")


def back(form: TaintForm, error: str = "") -> Redirect:
    """To the page (303, so a reload does not post again), at the node, with the refusal when there was one."""
    query = f"&error={quote(error)}" if error else ""
    return Redirect(f"/?node={quote(form.node_id)}{query}#detail", status_code=303)


async def from_form(
    request: Request[Any, Any, Any], form: TaintForm, change: Callable[[], Awaitable[object]]
) -> Redirect:
    """Check the origin and the token, make the change, and go back to the page (with the refusal if any)."""
    same_origin(request)
    if not token_matches(request.app.state.token, form.token):
        return back(form, "wrong or missing token: this gateway's changes need its CORRAL_HTTP_TOKEN")
    try:
        await change()
    except CorralError as error:
        return back(form, str(error))
    return back(form)


@post("/ui/taints/add", include_in_schema=False)
async def add_taint(request: Request[Any, Any, Any], client: Client, data: Form) -> Redirect:
    """The add form without the script: proposal 002's append of one taint."""
    body = {data.key: f"{data.value}:{data.effect}"}
    return await from_form(request, data, lambda: client.add_taints(data.node_id, taints_of(body)))


@post("/ui/taints/remove", include_in_schema=False)
async def remove_taint(request: Request[Any, Any, Any], client: Client, data: Form) -> Redirect:
    """A chip's remove button without the script: delete the taint with this key and effect."""
    body = {data.key: f":{data.effect}"}
    return await from_form(request, data, lambda: delete_taints_in(client, data.node_id, body))


@get("/static/{name:str}", include_in_schema=False)
async def static(name: str) -> Response[bytes]:
    """The page's stylesheet and script; any other name is 404 (no file system path is looked up)."""
    if name not in STATIC_FILES:
        raise NotFoundException(f"no static file {name!r}: there are {', '.join(sorted(STATIC_FILES))}")
    return Response(STATIC_FILES[name], media_type=STATIC_TYPES[name], headers={"Cache-Control": "no-cache"})


def ui_routers() -> list[Any]:
    """The page, its fragments and forms, the route index, and the static files."""
    return [
        home,
        api_index,
        fragment,
        some_nodes,
        add_taint,
        remove_taint,
        static,
    ]
