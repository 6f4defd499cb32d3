"""Decisions that fit one message: a launch for much work, split into whole events under a byte budget.

The server refuses a publish over its `max_payload`, and every reader refuses an event over
`CORRAL_MAX_MESSAGE_BYTES`; one round may launch thousands of nodes for 10,000 pieces of work with ids of up to 253
characters. Each part is an event of its own: its launch ids, the work they are for and their nominations, folded
as one event for the whole launch would be. A launch whose nominations alone are over the budget is asked for
without them, and they follow in `LaunchesNominated` events (which add the work to the launch's).

Sizes are counted from each value's own encoding, every list item and map entry with a separator: a part is never
bigger than counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from msgspec.structs import replace

from schemas import LaunchesNominated, NodesLaunchRequested
from services.core.state import Resources
from services.runtime.codec import encode

HEADER_ROOM = 1024
"""Bytes kept for the headers the bus adds (message id, expected sequence, trace context): NATS counts them in
`max_payload`."""

Nominations = Mapping[str, Mapping[str, Resources]]
"""Launch id -> work id -> the resources the plan put on that launch's node for it."""


def message_budget(max_message_bytes: int, max_payload: int) -> int:
    """The most bytes one autoscaler event may encode to: under both what the readers decode and what the server
    takes (less the headers), with a sixteenth to spare."""
    return min(max_message_bytes, max_payload - HEADER_ROOM) * 15 // 16


def _size(value: object) -> int:
    return len(encode(value))


def _entry(launch_id: str, put: Mapping[str, Resources]) -> int:
    """What `"launch_id":{...},` adds to a `nominated` map."""
    return _size(launch_id) + _size(put) + 2


def _cost(launch_id: str, work: Sequence[str], put: Mapping[str, Resources], known: Mapping[str, None]) -> int:
    """What one launch adds to a `NodesLaunchRequested`: its id, its work not `known` there yet, its nominations."""
    added = sum(_size(work_id) + 1 for work_id in dict.fromkeys(work) if work_id not in known)
    return _size(launch_id) + 1 + added + (_entry(launch_id, put) if put else 0)


def launch_parts(
    template: NodesLaunchRequested,
    per_node: Sequence[tuple[str, Sequence[str], Mapping[str, Resources]]],
    budget: int,
    event_id: Callable[[], str],
) -> list[NodesLaunchRequested | LaunchesNominated]:
    """One launch (`template`: its type, reason and time) of the nodes `per_node` lists (launch id, the work it is
    for, its nominations), as events each of at most `budget` bytes, each with a fresh `event_id()`."""
    parts: list[NodesLaunchRequested | LaunchesNominated] = []
    base = _size(replace(template, event_id=event_id(), launch_ids=[], work=[], nominated={}))
    ids: list[str] = []
    work: dict[str, None] = {}
    nominated: dict[str, Mapping[str, Resources]] = {}
    overflow: dict[str, Mapping[str, Resources]] = {}
    used = base

    def close() -> None:
        if ids:
            parts.append(
                replace(
                    template, event_id=event_id(), launch_ids=list(ids), work=sorted(work), nominated=dict(nominated)
                )
            )
        ids.clear()
        work.clear()
        nominated.clear()

    for launch_id, wanted, room in per_node:
        fits = base + _cost(launch_id, wanted, room, {}) <= budget
        if not fits:  # its work goes in `LaunchesNominated` events
            overflow[launch_id] = room
        its_work, put = (wanted, room) if fits else ((), {})
        cost = _cost(launch_id, its_work, put, work)
        if used + cost > budget:
            close()
            used, cost = base, _cost(launch_id, its_work, put, work)
        ids.append(launch_id)
        work.update(dict.fromkeys(its_work))
        if put:
            nominated[launch_id] = put
        used += cost
    close()
    return [*parts, *nomination_parts(overflow, budget, event_id)]


def nomination_parts(nominated: Nominations, budget: int, event_id: Callable[[], str]) -> list[LaunchesNominated]:
    """`nominated` as `LaunchesNominated` events each of at most `budget` bytes (one launch's work may be spread
    over several), each with a fresh `event_id()`."""
    parts: list[LaunchesNominated] = []
    base = _size(LaunchesNominated(event_id=event_id(), nominated={}))
    current: dict[str, dict[str, Resources]] = {}
    used = base
    for launch_id, put in nominated.items():
        for work_id, amount in put.items():
            cost = _size(work_id) + _size(amount) + 2
            opening = 0 if launch_id in current else _size(launch_id) + 4
            if current and used + opening + cost > budget:
                parts.append(LaunchesNominated(event_id=event_id(), nominated=current))
                current, used, opening = {}, base, _size(launch_id) + 4
            current.setdefault(launch_id, {})[work_id] = amount
            used += opening + cost
    if current:
        parts.append(LaunchesNominated(event_id=event_id(), nominated=current))
    return parts


def existing_parts(
    held: Mapping[str, Mapping[str, Mapping[str, Resources]]], budget: int, event_id: Callable[[], str]
) -> list[LaunchesNominated]:
    """`held` (launch id -> existing node id -> work id -> resources) as `LaunchesNominated.existing` events each
    of at most `budget` bytes, a launch's whole part in one (a part alone over the budget is left out: that room is
    not held, as before existing nodes held any)."""
    parts: list[LaunchesNominated] = []
    base = _size(LaunchesNominated(event_id=event_id(), nominated={}))
    current: dict[str, Mapping[str, Mapping[str, Resources]]] = {}
    used = base
    for launch_id, on_nodes in held.items():
        cost = _size(launch_id) + _size(on_nodes) + 2
        if base + cost > budget:
            continue
        if current and used + cost > budget:
            parts.append(LaunchesNominated(event_id=event_id(), nominated={}, existing=_plain(current)))
            current, used = {}, base
        current[launch_id] = on_nodes
        used += cost
    if current:
        parts.append(LaunchesNominated(event_id=event_id(), nominated={}, existing=_plain(current)))
    return parts


def _plain(
    held: Mapping[str, Mapping[str, Mapping[str, Resources]]],
) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    return {
        launch_id: {node_id: {work_id: dict(amount) for work_id, amount in put.items()} for node_id, put in on.items()}
        for launch_id, on in held.items()
    }
