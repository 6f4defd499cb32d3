"""Answers that fit the bus: list answers cut into pages under the payload limit, and single answers checked.

A listing is computed once, for its first page, and kept (a few at a time) while its pages are read, so every page
comes from the same point in the log. A cursor names the listing, the log sequence it was computed at and the
position of the page's first item: `<listing>.<sequence>.<position>`.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import msgspec

from schemas.decisions import Pending
from schemas.replies import BatchReply, Rejected
from services.core.errors import ConflictError, RejectedError
from services.runtime.codec import encode

HEADROOM = 16 * 1024
"""Bytes of the payload limit left for headers (trace context) and the envelope's own fields."""

KEPT_LISTINGS = 8
"""Listings under way a service keeps for their later pages; the oldest is dropped first (a listing read to its
end is dropped at once)."""

CURSOR_WIDTH = 64
"""Room kept in every page for its `next` cursor."""


class _Listing:
    """A whole answer as of `sequence`, its lists flattened into one run of items (dicts as key-value pairs);
    `query` is the query it answers, but for the cursor (a cursor of another query is not this listing's)."""

    def __init__(self, reply: msgspec.Struct, sequence: int, query: bytes) -> None:
        self.reply, self.sequence, self.query = reply, sequence, query
        self.sections: list[tuple[str, list[Any], bool]] = []
        for name in reply.__struct_fields__:
            value = getattr(reply, name)
            if isinstance(value, list | dict):
                items = list(value.items()) if isinstance(value, dict) else value
                self.sections.append((name, items, isinstance(value, dict)))
        self.total = sum(len(items) for _, items, _ in self.sections)
        empty: dict[str, Any] = {name: {} if is_dict else [] for name, _, is_dict in self.sections}
        self.envelope = len(encode(msgspec.structs.replace(reply, **empty))) + CURSOR_WIDTH

    def items_from(self, position: int) -> Any:
        """(section name, is a dict, item) for every item from `position` on."""
        for name, items, is_dict in self.sections:
            if position < len(items):
                for item in itertools.islice(items, position, None):
                    yield name, is_dict, item
                position = 0
            else:
                position -= len(items)


class Pager:
    """Fits answers into the bus's payload limit (`limit()` bytes): list answers in pages, others checked.

    `sequence()` is where the service's view stands in the log; `exact()` says whether the view is the fold of the
    log up to there and nothing more (a leading scheduler's also holds what it decided until the log holds it). Only
    an exact view lists again for a cursor it no longer holds: every exact view of one sequence lists the same.
    """

    def __init__(
        self, sequence: Callable[[], int], limit: Callable[[], int], exact: Callable[[], bool] = lambda: True
    ) -> None:
        self.sequence, self.limit, self.exact = sequence, limit, exact
        self._listings: OrderedDict[int, _Listing] = OrderedDict()
        self._next_id = 1

    def page(self, query: Any, answer: Callable[[Any], msgspec.Struct]) -> msgspec.Struct:
        """The page of `answer(query)` that `query.cursor` names (the first page when it is empty)."""
        if not query.cursor:
            listing = self._list(query, answer)
            return self._cut(listing, self._keep(listing), 0)
        listing_id, listed_at, position = _parse(query.cursor)
        held = self._listings.get(listing_id)
        if held is not None and held.sequence == listed_at and held.query == _query_key(query):
            self._listings.move_to_end(listing_id)
            return self._cut(held, listing_id, position)
        if listed_at != self.sequence() or not self.exact():
            moved = f"the log has moved on (now at {self.sequence()})" if listed_at != self.sequence() else ""
            raise ConflictError(
                f"cursor {query.cursor!r}: the listing of sequence {listed_at} is no longer held here and "
                f"{moved or 'the view holds decisions the log does not hold yet'}; list again from the first page"
            )
        listing = self._list(query, answer)  # another instance began it, at this same point
        if listing_id not in self._listings:  # (an id this instance gave another listing stays that listing's)
            self._listings[listing_id] = listing
            self._trim()
        return self._cut(listing, listing_id, position)

    def _list(self, query: Any, answer: Callable[[Any], msgspec.Struct]) -> _Listing:
        return _Listing(_limited(answer(query), query.limit), self.sequence(), _query_key(query))

    def _keep(self, listing: _Listing) -> int:
        listing_id = self._next_id
        self._next_id += 1
        self._listings[listing_id] = listing
        self._trim()
        return listing_id

    def _trim(self) -> None:
        while len(self._listings) > KEPT_LISTINGS:
            self._listings.popitem(last=False)

    def _cut(self, listing: _Listing, listing_id: int, position: int) -> msgspec.Struct:
        """The items from `position` on that fit the budget (at least one), and the cursor of the rest."""
        budget = self.limit() - HEADROOM
        room = budget - listing.envelope
        taken: dict[str, list[Any]] = {name: [] for name, _, _ in listing.sections}
        count = 0
        for name, is_dict, item in listing.items_from(position):
            size = (len(encode(item[0])) + len(encode(item[1])) + 2) if is_dict else len(encode(item)) + 1
            kept = item
            if size > room:
                if count:
                    break
                kept, size = _shrunk(item, room, budget)
            taken[name].append(kept)
            room -= size
            count += 1
        end = position + count
        sections = {name: dict(taken[name]) if is_dict else taken[name] for name, _, is_dict in listing.sections}
        cursor = f"{listing_id}.{listing.sequence}.{end}" if end < listing.total else ""
        if not cursor and self._listings.get(listing_id) is listing:
            del self._listings[listing_id]  # read to its end: only listings under way are kept
        return msgspec.structs.replace(listing.reply, **sections, next=cursor)

    def fit(self, value: msgspec.Struct) -> bytes:
        """`value` encoded, if it fits the limit; a Pending with its node lists shortened; else a clear rejection."""
        return fit(value, self.limit())


def fit(value: msgspec.Struct, limit: int) -> bytes:
    """`value` encoded, if it fits `limit` bytes; a Pending with its node lists shortened; else a clear rejection."""
    data = encode(value)
    if len(data) <= limit:
        return data
    if isinstance(value, Pending):
        data = encode(trimmed_pending(value, limit - HEADROOM))
        if len(data) <= limit:
            return data
    if isinstance(value, BatchReply):
        data = encode(_trimmed_batch(value, limit - HEADROOM))
        if len(data) <= limit:
            return data
    return encode(Rejected(f"the answer is {len(data)} bytes, over the bus's payload limit of {limit} bytes"))


def _shrunk(item: Any, room: int, budget: int) -> tuple[Any, int]:
    """An item too large for a page on its own: a Pending with fewer node ids, or a `RejectedError`."""
    if isinstance(item, Pending):
        trimmed = trimmed_pending(item, room)
        size = len(encode(trimmed)) + 1
        if size <= room:
            return trimmed, size
    raise RejectedError(f"one item of this answer is over the bus's payload limit of {budget + HEADROOM} bytes")


def _trimmed_batch(batch: BatchReply, room: int) -> BatchReply:
    """The batch's answers with the node lists of its Pendings shortened alike, so it fits `room` bytes."""
    pendings = sum(isinstance(reply, Pending) for reply in batch.replies)
    others = len(encode(BatchReply([reply for reply in batch.replies if not isinstance(reply, Pending)])))
    share = (room - others) // max(1, pendings)
    return BatchReply(
        [trimmed_pending(reply, share) if isinstance(reply, Pending) else reply for reply in batch.replies]
    )


def trimmed_pending(pending: Pending, room: int) -> Pending:
    """The Pending with each reason's node ids cut to the same share, so it fits `room` bytes (counts are kept)."""
    listed = sum(len(ids) for ids in pending.nodes_by_reason.values())
    fixed = len(encode(msgspec.structs.replace(pending, nodes_by_reason={})))
    per_id = -(-(len(encode(pending)) - fixed) // max(1, listed)) + 1  # rounded up, with room to spare
    keep = max(0, (room - fixed) // per_id // max(1, len(pending.nodes_by_reason)) - 1)
    shortened = {reason: ids[:keep] for reason, ids in pending.nodes_by_reason.items()}
    return msgspec.structs.replace(pending, nodes_by_reason=shortened)


def _limited(reply: msgspec.Struct, limit: int) -> msgspec.Struct:
    """`reply` with at most `limit` items in each of its lists and dicts (all of them when `limit` is 0)."""
    if not limit:
        return reply
    cut: dict[str, Any] = {}
    for name in reply.__struct_fields__:
        value = getattr(reply, name)
        if isinstance(value, list):
            cut[name] = value[:limit]
        elif isinstance(value, dict):
            cut[name] = dict(itertools.islice(value.items(), limit))
    return msgspec.structs.replace(reply, **cut)


def _query_key(query: Any) -> bytes:
    return encode(msgspec.structs.replace(query, cursor=""))


def _parse(cursor: str) -> tuple[int, int, int]:
    parts = cursor.split(".")
    if len(parts) != 3 or not all(part.isascii() and part.isdigit() for part in parts):
        raise RejectedError(f"cursor {cursor!r}: not a cursor of this service (give the `next` of the previous page)")
    listing_id, sequence, position = (int(part) for part in parts)
    return listing_id, sequence, position
