"""The pending queue indexed by what blocks each piece of waiting work, so a re-try visits only what could move
(pure).

Waiting work is filed per scope in buckets: work of one shape (the same request but for its id, priority and
restarts; the same outcome on the same view) and priority shares a bucket, in arrival order. A walk merges the
buckets an event woke in queue order (higher priority first, then arrival), the order a full re-try uses, and a
bucket whose work failed can be dropped from the rest of the walk: the rest of it fails too on the same view.
"""

from __future__ import annotations

import heapq
from bisect import insort
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Final

BucketKey = tuple[int, Hashable]
"""(priority, shape)."""

COMPACT_AFTER: Final = 64
"""A bucket rewrites its list once it holds this many (and more than half) entries of work gone from it."""


class Bucket:
    """Work of one shape and priority in arrival order; entries of work that left stay until compacted."""

    __slots__ = ("dead", "entries", "on_placement", "priority", "room_only", "same_outcome")

    def __init__(self, priority: int, *, same_outcome: bool, on_placement: bool, room_only: bool) -> None:
        self.priority = priority
        self.room_only = room_only
        """Whether only a node that changed can let this work in (it fails on the view it was last tried on, and
        no change elsewhere can help it: no affinity, no labels other actors' anti-affinity could name)."""
        self.same_outcome = same_outcome
        """Whether every piece of work here fails when one does, on the same view (a shape, not one piece)."""
        self.on_placement = on_placement
        """Whether the work waits on other work being placed (affinity, DataFlow, a placement group's bundle)."""
        self.entries: list[tuple[int, int, str]] = []
        """(arrival, filing token, work id), ascending."""
        self.dead = 0


class Filing:
    """Where one piece of waiting work is filed."""

    __slots__ = ("bucket", "key", "scope_id", "token")

    def __init__(self, scope_id: str, key: BucketKey, bucket: Bucket, token: int) -> None:
        self.scope_id, self.key, self.bucket, self.token = scope_id, key, bucket, token


class WaitingIndex:
    """Every scope's waiting work, in buckets by shape and priority (see the module)."""

    __slots__ = ("_filed", "_scopes", "_tokens")

    def __init__(self) -> None:
        self._scopes: dict[str, dict[BucketKey, Bucket]] = {}
        self._filed: dict[str, Filing] = {}
        self._tokens = 0

    def file(
        self,
        scope_id: str,
        work_id: str,
        arrival: int,
        key: BucketKey,
        *,
        same_outcome: bool,
        on_placement: bool,
        room_only: bool = False,
    ) -> None:
        """File waiting work under `key` in its scope (moving it if it was filed elsewhere); the flags describe
        the bucket, so all work filed under one key must agree on them."""
        filing = self._filed.get(work_id)
        if filing is not None:
            if filing.scope_id == scope_id and filing.key == key:
                return
            self.unfile(work_id)
        buckets = self._scopes.setdefault(scope_id, {})
        bucket = buckets.get(key)
        if bucket is None:
            bucket = Bucket(key[0], same_outcome=same_outcome, on_placement=on_placement, room_only=room_only)
            buckets[key] = bucket
        self._tokens += 1
        entry = (arrival, self._tokens, work_id)
        if not bucket.entries or bucket.entries[-1] < entry:
            bucket.entries.append(entry)
        else:
            insort(bucket.entries, entry)
        self._filed[work_id] = Filing(scope_id, key, bucket, self._tokens)

    def unfile(self, work_id: str) -> None:
        """The work no longer waits (placed, removed, or failed for good)."""
        filing = self._filed.pop(work_id, None)
        if filing is None:
            return
        bucket = filing.bucket
        bucket.dead += 1
        if bucket.dead == len(bucket.entries):
            del self._scopes[filing.scope_id][filing.key]
            if not self._scopes[filing.scope_id]:
                del self._scopes[filing.scope_id]
        elif bucket.dead >= COMPACT_AFTER and bucket.dead * 2 > len(bucket.entries):
            bucket.entries = [entry for entry in bucket.entries if self.holds(entry)]
            bucket.dead = 0

    def scopes(self) -> Iterable[str]:
        """The scopes (ROOT or a cluster id) that have waiting work filed."""
        return self._scopes.keys()

    def forget_scope(self, scope_id: str) -> None:
        """Drop a scope that is gone (a destroyed virtual cluster) with whatever is still filed in it."""
        for bucket in self._scopes.pop(scope_id, {}).values():
            for _arrival, token, work_id in bucket.entries:
                filing = self._filed.get(work_id)
                if filing is not None and filing.token == token:
                    del self._filed[work_id]

    def walk(self, scope_id: str, *, everything: bool, skip: Callable[[str], bool] | None = None) -> Walk:
        """The scope's waiting work in queue order: every bucket, or (not `everything`) only work waiting on a
        placement; with `skip`, not the `room_only` buckets it refuses, given one piece of their work. The buckets
        are read as they are now: work filed during the walk waits for the next one."""
        buckets = [
            bucket
            for bucket in self._scopes.get(scope_id, {}).values()
            if (everything or bucket.on_placement)
            and not (skip is not None and bucket.room_only and skip(self._head(bucket)))
        ]
        return Walk(self, buckets)

    def _head(self, bucket: Bucket) -> str:
        """The first work still filed in a bucket (a bucket is dropped once nothing is)."""
        return next(entry[2] for entry in bucket.entries if self.holds(entry))

    def holds(self, entry: tuple[int, int, str]) -> bool:
        """Whether a bucket's entry is still where its work is filed."""
        filing = self._filed.get(entry[2])
        return filing is not None and filing.token == entry[1]


class Walk:
    """An iterator over waiting work in queue order; `drop_bucket` skips the rest of the last one's bucket."""

    __slots__ = ("_current", "_heap", "_index")

    def __init__(self, index: WaitingIndex, buckets: list[Bucket]) -> None:
        self._index = index
        self._heap: list[tuple[int, int, int, str, Iterator[tuple[int, int, str]], Bucket]] = []
        for number, bucket in enumerate(buckets):
            self._push(number, iter(list(bucket.entries)), bucket)
        self._current: Bucket | None = None

    def _push(self, number: int, entries: Iterator[tuple[int, int, str]], bucket: Bucket) -> None:
        """Queue the bucket's next work still filed there (a bucket's walk is numbered: no two compare equal)."""
        for entry in entries:
            if self._index.holds(entry):
                heapq.heappush(self._heap, (-bucket.priority, entry[0], number, entry[2], entries, bucket))
                return

    def __iter__(self) -> Walk:
        return self

    def __next__(self) -> str:
        if not self._heap:
            raise StopIteration
        _priority, _arrival, number, work_id, entries, bucket = heapq.heappop(self._heap)
        self._current = bucket
        self._push(number, entries, bucket)
        return work_id

    def drop_bucket(self) -> None:
        """The work just returned failed and its bucket's work all fails alike: skip the rest of that bucket."""
        current = self._current
        if current is None or not current.same_outcome:
            return
        self._heap = [item for item in self._heap if item[5] is not current]
        heapq.heapify(self._heap)
