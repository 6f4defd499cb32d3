"""The web page's HTML, rendered on the server: the whole page and each section alone (what the script swaps in).

Every value goes through `esc` (ids, addresses and resource names are free text a user chose)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from html import escape
from typing import get_args

from schemas import AnyEvent, Pending
from services.gateway.cluster import NodeView
from services.gateway.parsing import EFFECTS
from services.gateway.vclusters import TreeEntry

NODES_SHOWN = 300
"""At most this many node cards; the rest are counted (the JSON API lists them all)."""
IDS_SHOWN = 12
"""At most this many node ids behind one pending reason."""


TITLES = {"nodes": "Nodes", "pending": "Pending work", "groups": "Placement groups", "vclusters": "Virtual clusters"}


def esc(value: object) -> str:
    """A value as HTML text or attribute content."""
    return escape(str(value), quote=True)


def amount(value: float | None) -> str:
    """An amount without a needless `.0`, large ones in M, G or T (None: unbounded)."""
    if value is None:
        return "∞"
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:g}"


def sections_of(event_type: str) -> list[str]:
    """The sections an event of this type can change (what the script re-fetches when one arrives)."""
    for prefix, sections in (
        ("Node", ["nodes", "pending"]),
        ("Taints", ["nodes", "pending"]),
        ("Actor", ["nodes", "pending"]),
        ("PlacementGroup", ["nodes", "pending", "groups"]),
        ("Virtual", ["nodes", "pending", "vclusters"]),
    ):
        if event_type.startswith(prefix):
            return sections
    return []


def event_sections() -> dict[str, list[str]]:
    """Every event type of the log that changes a section, with the sections it changes."""
    names = (kind.__name__ for kind in get_args(AnyEvent))
    return {name: sections_of(name) for name in names if sections_of(name)}


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
        f'<div class="usage" title="{esc(name)}: {amount(used)} of {amount(total)} used">'
        f'<span class="res">{esc(name)}</span>'
        f'<span class="bar"><span class="fill" style="width:{percent:.1f}%"></span></span>'
        f'<span class="num">{amount(used)} / {amount(total)}</span></div>'
    )


def taint_chip(node_id: str, key: str, value: str, effect: str, token_required: bool) -> str:
    """A taint with its remove button (proposal 002's DELETE; a form post without the script)."""
    text = f"{key}={value}:{effect}" if value else f"{key}:{effect}"
    return (
        f'<form class="chip taint" method="post" action="/ui/taints/remove" data-node="{esc(node_id)}" '
        f'data-key="{esc(key)}">'
        f'<input type="hidden" name="node_id" value="{esc(node_id)}">'
        f'<input type="hidden" name="key" value="{esc(key)}">'
        f'<input type="hidden" name="effect" value="{esc(effect)}">'
        f'<span class="chip-text">{esc(text)}</span>{token_field(token_required)}'
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


def node_card(node: NodeView, token_required: bool) -> str:
    """One node: state, address, usage bars, label chips, taint chips and the add form."""
    bars = "".join(usage_bar(name, total, node.available.get(name, 0.0)) for name, total in node.resources.items())
    labels = "".join(f'<span class="chip label">{esc(key)}={esc(value)}</span>' for key, value in node.labels.items())
    taints = "".join(
        taint_chip(node.node_id, taint.key, taint.value, taint.effect, token_required) for taint in node.taints
    )
    parent = f' <span class="muted">on {esc(node.parent_node)}</span>' if node.parent_node else ""
    actors = f"{node.actors} actor" + ("" if node.actors == 1 else "s")
    return (
        f'<article class="node" id="node-{esc(node.node_id)}" data-node="{esc(node.node_id)}">'
        f'<header><h3>{esc(node.node_id)}</h3><span class="state {esc(node.state)}">{esc(node.state)}</span></header>'
        f'<p class="muted">{esc(node.address) or "no address"} · {actors}{parent}</p>'
        f"{bars or '<p class=muted>no resources</p>'}"
        f'<div class="chips">{labels}</div><div class="chips taints">{taints}</div>'
        f"{add_taint_form(node.node_id, token_required)}</article>"
    )


def nodes_section(nodes: list[NodeView], token_required: bool) -> str:
    """The node cards (at most NODES_SHOWN)."""
    if not nodes:
        return '<p class="empty">No live nodes.</p>'
    cards = "".join(node_card(node, token_required) for node in nodes[:NODES_SHOWN])
    more = len(nodes) - NODES_SHOWN
    rest = f'<p class="muted">and {more} more nodes (<a href="/api/v1/nodes">/api/v1/nodes</a>)</p>' if more > 0 else ""
    return f'<div class="cards">{cards}</div>{rest}'


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
            f"{amount(cluster.total_resources.get(name, 0.0) - cluster.available_resources.get(name, 0.0))}"
            f" / {amount(cluster.total_resources.get(name, 0.0))} / {amount(cluster.max_resources.get(name))}</span>"
            for name in names
        )
        message = f' <span class="muted">{esc(cluster.message)}</span>' if cluster.message else ""
        rows.append(
            f'<tr><th scope="row" style="padding-left:{0.5 + 1.5 * entry.depth:.1f}em">{esc(cluster.cluster_id)}</th>'
            f'<td><span class="state {esc(cluster.state)}">{esc(cluster.state)}</span>{message}</td>'
            f"<td>{resources}</td></tr>"
        )
    head = "<thead><tr><th>cluster</th><th>state</th><th>used / total / max</th></tr></thead>"
    return f"<table>{head}<tbody>{''.join(rows)}</tbody></table>"


def unavailable(why: str) -> str:
    """A section whose service did not answer."""
    return f'<p class="flash error">Not available now: {esc(why)}</p>'


def page(bodies: dict[str, str], *, token_required: bool, since: int, error: str = "") -> str:
    """The whole page around each section's rendered body; the script is told where the event stream starts."""
    blocks = "".join(
        f'<section id="{name}" class="panel {name}"><h2>{TITLES[name]}</h2>'
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
        f'<body data-since="{since}" data-events="{events}" data-token-required="{str(token_required).lower()}">'
        '<header class="top"><h1>Corral</h1><span id="live" class="muted">server-rendered</span>'
        f'{login}<nav><a href="/docs">API docs</a> <a href="/api/v1">API index</a></nav></header>'
        f'<p id="status" class="flash" role="status" hidden></p>{flash}<main>{blocks}</main>'
        '<script src="/static/page.js" defer></script></body></html>'
    )
