"""The web page's HTML, rendered on the server: the whole page and the sections the script swaps in.

The summary, a node's detail, pending work, placement groups and virtual clusters are rendered here; the node,
actor and group tables are the script's (filtered, grouped and paged in the browser from the JSON API), with a
plain list of links here for a browser without the script. Every value goes through `esc` (ids, addresses and
resource names are free text a user chose)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from html import escape
from typing import get_args
from urllib.parse import quote

from schemas import AnyEvent, Pending, Taint
from schemas.queries import AutoscalerStatusReply
from services.core.amounts import format_amount
from services.core.labels import ZONE
from services.gateway.cluster import NodeView
from services.gateway.parsing import EFFECTS
from services.gateway.vclusters import TreeEntry

NODES_LISTED = 100
"""At most this many node links without the script; the rest are counted (the JSON API lists them all)."""
IDS_SHOWN = 12
"""At most this many node ids behind one pending reason."""
STATES = ("ready", "tainted", "cordoned", "draining", "unreachable", "dead")
"""The summary's node states: `ready` is `alive` (schedulable, no taint keeps work off), then the node conditions."""
LAUNCHES_SHOWN = 8
"""The autoscaler's newest launches the summary lists."""

TITLES = {
    "summary": "Cluster",
    "nodes": "Nodes",
    "detail": "Node",
    "pending": "Pending work",
    "actors": "Actors",
    "groups": "Placement groups",
    "vclusters": "Virtual clusters",
}
SERVER_SECTIONS = ("summary", "pending", "vclusters")
"""The sections fetched again as HTML fragments when an event changes them (`/ui/<name>`)."""


def esc(value: object) -> str:
    """A value as HTML text or attribute content."""
    return escape(str(value), quote=True)


def amount(name: str, value: float | None) -> str:
    """A resource's amount with the Kubernetes suffixes (`4Gi`, `500m`); None: unbounded."""
    return "∞" if value is None else format_amount(name, value)


def sections_of(event_type: str) -> list[str]:
    """The sections an event of this type can change: `nodes` and `actors` are the script's own tables (it
    fetches only the nodes an event names), the others are fetched again as fragments."""
    for prefix, sections in (
        ("Node", ["nodes", "summary", "pending"]),
        ("Taints", ["nodes", "summary", "pending"]),
        ("Actor", ["nodes", "actors", "summary", "pending"]),
        ("PlacementGroup", ["nodes", "groups", "summary", "pending"]),
        ("Virtual", ["nodes", "summary", "pending", "vclusters"]),
        ("Launches", ["summary"]),
        ("Autoscaler", ["summary"]),
    ):
        if event_type.startswith(prefix):
            return sections
    return []


def event_sections() -> dict[str, list[str]]:
    """Every event type of the log that changes a section, with the sections it changes."""
    names = (kind.__name__ for kind in get_args(AnyEvent))
    return {name: sections_of(name) for name in names if sections_of(name)}


def state_of(node: NodeView) -> str:
    """The node's state as the summary counts it (`alive` reads `ready`)."""
    return "ready" if node.state == "alive" else node.state


def token_field(token_required: bool) -> str:
    """The token input of a form, for a browser without the script (the script fills the header instead)."""
    if not token_required:
        return ""
    return '<input class="nojs-token" type="password" name="token" placeholder="token" aria-label="token">'


def usage_bar(name: str, total: float, available: float) -> str:
    """One resource: used / total as a bar."""
    used = max(total - available, 0.0)
    percent = 100.0 * used / total if total > 0 else 0.0
    return (
        f'<div class="usage" title="{esc(name)}: {amount(name, used)} of {amount(name, total)} used">'
        f'<span class="res">{esc(name)}</span>'
        f'<span class="bar"><span class="fill" style="width:{percent:.1f}%"></span></span>'
        f'<span class="num">{amount(name, used)} / {amount(name, total)}</span></div>'
    )


def state_chip(state: str) -> str:
    """A node's or a cluster's state as a coloured chip."""
    return f'<span class="state {esc(state)}">{esc(state)}</span>'


def summary_section(nodes: list[NodeView], pending: list[Pending], autoscaler: AutoscalerStatusReply | None) -> str:
    """Nodes by state, resources used / total per kind, pending work by its first reason, and the autoscaler."""
    physical = [node for node in nodes if not node.parent_node]
    states = Counter(state_of(node) for node in physical)
    counts = "".join(
        f'<li class="count {state}" data-state="{state}"><b>{states.get(state, 0)}</b> {state}</li>' for state in STATES
    )
    totals: dict[str, list[float]] = {}
    for node in physical:
        for name, total in node.resources.items():
            pair = totals.setdefault(name, [0.0, 0.0])
            pair[0] += total
            pair[1] += node.available.get(name, 0.0)
    bars = "".join(usage_bar(name, total, free) for name, (total, free) in sorted(totals.items()))
    first = Counter(next(iter(work.reasons), work.group_reason or work.message) for work in pending)
    reasons = "".join(
        f'<li><span class="reason">{esc(reason)}</span> <b>{count}</b></li>' for reason, count in first.most_common()
    )
    return (
        f'<div class="summary-grid"><div><h3>{len(physical)} nodes</h3><ul class="counts">{counts}</ul></div>'
        f"<div><h3>Resources used / total</h3>{bars or '<p class=muted>no resources</p>'}</div>"
        f'<div><h3>{len(pending)} pending</h3><ul class="first-reasons">'
        f"{reasons or '<li class=muted>nothing waits</li>'}</ul></div>"
        f"<div><h3>Autoscaler</h3>{autoscaler_summary(autoscaler)}</div></div>"
    )


def autoscaler_summary(status: AutoscalerStatusReply | None) -> str:
    """The node types (running, launching, idle of min..max) and the newest launches, or that none runs."""
    if status is None:
        return '<p class="muted">not running</p>'
    types = "".join(
        f"<li><b>{esc(kind.name)}</b> {kind.running} running, {kind.launching} launching, {kind.idle} idle "
        f'<span class="muted">({kind.min_workers}..{kind.max_workers})</span></li>'
        for kind in status.node_types
    )
    launches = "".join(
        f"<li>{esc(launch.launch_id)} <b>{esc(launch.node_type)}</b> {state_chip(launch.state)} "
        f'<span class="muted">{esc(launch.reason)}</span></li>'
        for launch in status.launches[:LAUNCHES_SHOWN]
    )
    return (
        f'<ul class="types">{types or "<li class=muted>no node types</li>"}</ul>'
        f'<ul class="launches">{launches or "<li class=muted>no launches</li>"}</ul>'
    )


def node_links(nodes: list[NodeView]) -> str:
    """Without the script: each node's id (a link to its detail) and state; the script draws the table instead."""
    if not nodes:
        return '<p class="empty">No live nodes.</p>'
    rows = "".join(
        f'<li><a href="/?node={esc(quote(node.node_id, safe=""))}#detail">{esc(node.node_id)}</a> '
        f"{state_chip(state_of(node))} "
        f'<span class="muted">{esc(node.labels.get(ZONE, ""))}</span></li>'
        for node in nodes[:NODES_LISTED]
    )
    more = len(nodes) - NODES_LISTED
    rest = f'<p class="muted">and {more} more (<a href="/api/v1/nodes">/api/v1/nodes</a>)</p>' if more > 0 else ""
    return f'<ul class="node-links">{rows}</ul>{rest}'


def taint_text(taint: Taint) -> str:
    """`key=value:Effect`, or `key:Effect` without a value."""
    return f"{taint.key}={taint.value}:{taint.effect}" if taint.value else f"{taint.key}:{taint.effect}"


def taint_chip(node_id: str, taint: Taint, source: str, token_required: bool) -> str:
    """A taint, where it comes from, and its remove button (proposal 002's DELETE; a form post without the script)."""
    text = taint_text(taint)
    return (
        f'<form class="chip taint" method="post" action="/ui/taints/remove" data-node="{esc(node_id)}" '
        f'data-key="{esc(taint.key)}">'
        f'<input type="hidden" name="node_id" value="{esc(node_id)}">'
        f'<input type="hidden" name="key" value="{esc(taint.key)}">'
        f'<input type="hidden" name="effect" value="{esc(taint.effect)}">'
        f'<span class="chip-text">{esc(text)}</span> <span class="source">{esc(source)}</span>'
        f"{token_field(token_required)}"
        f'<button type="submit" title="remove taint {esc(text)}" aria-label="remove taint {esc(text)}">×</button>'
        "</form>"
    )


def add_taint_form(node_id: str, token_required: bool) -> str:
    """Key / value / effect: proposal 002's POST (a form post without the script)."""
    effects = "".join(f'<option value="{esc(effect)}">{esc(effect)}</option>' for effect in EFFECTS)
    return (
        f'<form class="add-taint" method="post" action="/ui/taints/add" data-node="{esc(node_id)}">'
        f'<input type="hidden" name="node_id" value="{esc(node_id)}">'
        '<input name="key" placeholder="taint key" aria-label="taint key" required>'
        '<input name="value" placeholder="value" aria-label="taint value">'
        f'<select name="effect" aria-label="taint effect">{effects}</select>{token_field(token_required)}'
        '<button type="submit">Add taint</button></form>'
    )


def label_rows(node: NodeView) -> str:
    """Each label with the layer it comes from: the agent's, the operator's (over the agent's or its own), or
    the agent's that the operator removed."""
    layers = node.layers
    if layers is None:
        return "".join(
            f"<tr><th>{esc(key)}</th><td>{esc(value)}</td><td>parent node</td></tr>"
            for key, value in sorted(node.labels.items())
        )
    operator, agent = layers.operator_labels, layers.agent_labels
    rows = []
    for key in sorted(set(node.labels) | set(operator.removed)):
        if key in operator.labels:
            source = "operator" + (f" (agent: {agent[key]})" if key in agent else "")
            rows.append(f"<tr><th>{esc(key)}</th><td>{esc(operator.labels[key])}</td><td>{esc(source)}</td></tr>")
        elif key in node.labels:
            rows.append(f"<tr><th>{esc(key)}</th><td>{esc(node.labels[key])}</td><td>agent</td></tr>")
        elif key in agent:
            rows.append(
                f'<tr class="removed"><th>{esc(key)}</th><td>{esc(agent[key])}</td><td>removed by operator</td></tr>'
            )
    return "".join(rows)


def taint_chips(node: NodeView, token_required: bool) -> str:
    """The node's taints, each with its layer and remove button, then the agent's the operator removed."""
    operator = node.layers.operator_taints if node.layers else None
    mine = {(taint.key, taint.effect) for taint in operator.taints} if operator else set()
    chips = "".join(
        taint_chip(
            node.node_id,
            taint,
            "operator" if (taint.key, taint.effect) in mine else ("agent" if node.layers else "parent node"),
            token_required,
        )
        for taint in node.taints
    )
    removed = "".join(
        f'<span class="chip removed">{esc(taint_text(taint))} <span class="source">removed by operator</span></span>'
        for taint in (operator.removed if operator else [])
    )
    return chips + removed


def detail_section(
    node: NodeView | None, node_id: str, actors: list[str], events: list[tuple[int, str, str]], token_required: bool
) -> str:
    """One node: state, address, usage, labels by layer, taints (remove and add), its actors, its recent events."""
    if not node_id:
        return '<p class="empty">Pick a node in the table to see its labels, taints, actors and events.</p>'
    if node is None:
        return f'<p class="empty">No live node {esc(node_id)}.</p>'
    bars = "".join(usage_bar(name, total, node.available.get(name, 0.0)) for name, total in node.resources.items())
    parent = f" · on {esc(node.parent_node)}" if node.parent_node else ""
    actor_chips = "".join(f'<span class="chip id">{esc(actor)}</span>' for actor in actors)
    event_rows = "".join(
        f'<li><span class="muted">#{sequence}</span> <b>{esc(kind)}</b> {esc(meaning)}</li>'
        for sequence, kind, meaning in events
    )
    return (
        f'<article class="node-detail" id="node-{esc(node.node_id)}" data-node="{esc(node.node_id)}">'
        f"<header><h3>{esc(node.node_id)}</h3>{state_chip(state_of(node))}</header>"
        f'<p class="muted">{esc(node.address) or "no address"}{parent}</p>'
        f"{bars or '<p class=muted>no resources</p>'}"
        f'<h4>Labels</h4><table class="labels"><thead><tr><th>key</th><th>value</th><th>layer</th></tr></thead>'
        f"<tbody>{label_rows(node)}</tbody></table>"
        f'<h4>Taints</h4><div class="chips taints">{taint_chips(node, token_required)}</div>'
        f"{add_taint_form(node.node_id, token_required)}"
        f'<h4>{len(actors)} actors</h4><div class="chips actors">{actor_chips}</div>'
        f'<h4>Recent events</h4><ul class="events">{event_rows or "<li class=muted>none</li>"}</ul></article>'
    )


def id_chips(ids: Iterable[str]) -> str:
    """Node ids as chips (at most IDS_SHOWN, then a count)."""
    listed = list(ids)
    chips = "".join(f'<span class="chip id">{esc(node_id)}</span>' for node_id in listed[:IDS_SHOWN])
    more = len(listed) - IDS_SHOWN
    return chips + (f'<span class="muted"> +{more} more</span>' if more > 0 else "")


def pending_section(pending: list[Pending]) -> str:
    """Waiting work in queue order: its message, each reason with its count and the node ids behind it."""
    if not pending:
        return '<p class="empty">Nothing waits.</p>'
    rows = []
    for work in pending:
        reasons = "".join(
            f'<li><span class="reason">{esc(reason)}</span> <span class="muted">({count})</span> '
            f"{id_chips(work.nodes_by_reason.get(reason, []))}</li>"
            for reason, count in work.reasons.items()
        )
        group = f'<p class="muted">{esc(work.group_reason)}</p>' if work.group_reason else ""
        rows.append(
            f'<article class="pending" id="pending-{esc(work.id)}" data-work="{esc(work.id)}">'
            f'<h3>{esc(work.id)} <span class="muted">{esc(work.kind)}</span></h3>'
            f'<p class="message">{esc(work.message)}</p>{group}<ul class="reasons">{reasons}</ul></article>'
        )
    return "".join(rows)


def groups_section(groups: dict[str, list[str]]) -> str:
    """Placed groups: the node of each bundle."""
    if not groups:
        return '<p class="empty">No placement groups.</p>'
    rows = "".join(
        f'<tr><th scope="row">{esc(pg_id)}</th><td>{len(nodes)}</td><td>{id_chips(nodes)}</td></tr>'
        for pg_id, nodes in sorted(groups.items())
    )
    return f"<table><thead><tr><th>group</th><th>bundles</th><th>nodes</th></tr></thead><tbody>{rows}</tbody></table>"


def vclusters_section(tree: list[TreeEntry]) -> str:
    """The virtual-cluster tree, depth first: state and, per resource, used / total / max."""
    if not tree:
        return '<p class="empty">No virtual clusters.</p>'
    rows = []
    for entry in tree:
        cluster = entry.cluster
        names = sorted(set(cluster.total_resources) | set(cluster.max_resources))
        resources = "".join(
            f'<span class="chip">{esc(name)} '
            f"{amount(name, cluster.total_resources.get(name, 0.0) - cluster.available_resources.get(name, 0.0))}"
            f" / {amount(name, cluster.total_resources.get(name, 0.0))} / "
            f"{amount(name, cluster.max_resources.get(name))}</span>"
            for name in names
        )
        message = f' <span class="muted">{esc(cluster.message)}</span>' if cluster.message else ""
        rows.append(
            f'<tr><th scope="row" class="depth-{min(entry.depth, 9)}">{esc(cluster.cluster_id)}</th>'
            f"<td>{state_chip(cluster.state)}{message}</td><td>{resources}</td></tr>"
        )
    head = "<thead><tr><th>cluster</th><th>state</th><th>used / total / max</th></tr></thead>"
    return f"<table>{head}<tbody>{''.join(rows)}</tbody></table>"


def unavailable(why: str) -> str:
    """A section whose service did not answer."""
    return f'<p class="flash error">Not available now: {esc(why)}</p>'


NODE_TOOLS = (
    '<form class="tools" id="node-tools" hidden>'
    '<input id="node-search" type="search" placeholder="search id, address, label, taint" aria-label="search nodes">'
    '<input id="node-selector" placeholder="selector: zone=z1,gpu=exists()" aria-label="label selector">'
    '<input id="node-taint" placeholder="taint key" aria-label="taint filter">'
    '<select id="node-state" aria-label="state"><option value="">any state</option>'
    + "".join(f'<option value="{state}">{state}</option>' for state in STATES)
    + '</select><select id="node-zone" aria-label="zone"><option value="">any zone</option></select>'
    '<select id="node-group" aria-label="group by label"><option value="">no grouping</option></select>'
    '<span id="node-count" class="muted"></span></form>'
)
ACTOR_TOOLS = (
    '<form class="tools" id="actor-tools" hidden>'
    '<input id="actor-search" type="search" placeholder="search actor, node, label, status" aria-label="search actors">'
    '<span id="actor-count" class="muted"></span></form>'
)
GROUP_TOOLS = (
    '<form class="tools" id="group-tools" hidden>'
    '<input id="group-search" type="search" placeholder="search group or node" aria-label="search groups">'
    '<span id="group-count" class="muted"></span></form>'
)
TOOLS = {"nodes": NODE_TOOLS, "actors": ACTOR_TOOLS, "groups": GROUP_TOOLS}


def page(
    bodies: dict[str, str], *, token_required: bool, since: int, node_id: str, nodes: str = "null", error: str = ""
) -> str:
    """The whole page around each section's rendered body; the script is told where the event stream starts,
    which events change which section, the zone label, the node shown in detail, and the nodes (`nodes`: their
    JSON, `<` escaped; `null` to make the script ask for them)."""
    blocks = "".join(
        f'<section id="{name}" class="panel {name}"><h2>{TITLES[name]}</h2>{TOOLS.get(name, "")}'
        f'<div class="body" data-section="{name}">{body}</div></section>'
        for name, body in bodies.items()
    )
    login = (
        '<form id="login" hidden><input id="token" type="password" placeholder="token" aria-label="token">'
        '<button type="submit">Use token</button></form>'
        if token_required
        else ""
    )
    flash = f'<p class="flash error" role="alert">{esc(error)}</p>' if error else ""
    events = esc(json.dumps(event_sections()))
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<title>Corral</title><link rel="stylesheet" href="/static/page.css"></head>'
        f'<body data-since="{since}" data-events="{events}" data-token-required="{str(token_required).lower()}" '
        f'data-zone-label="{esc(ZONE)}" data-node="{esc(node_id)}">'
        '<header class="top"><h1>Corral</h1><span id="live" class="muted">server-rendered</span>'
        f'{login}<nav><a href="/docs">API docs</a> <a href="/api/v1">API index</a></nav></header>'
        f'<p id="status" class="flash" role="status" hidden></p>{flash}<main>{blocks}</main>'
        f'<script type="application/json" id="nodes-data">{nodes}</script>'
        '<script src="/static/page.js" defer></script></body></html>'
    )
