"""The client's history calls: what happened to an actor, node or virtual cluster, and why, at any past moment.

Everything here is read from the event log (and the scheduler's snapshot in Redis, when one is at or before the
moment asked about) and folded in this process with the pure core: the past needs no service to answer it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from schemas import ActorPlaced, AnyEvent, Pending, Placed
from schemas import subjects as s
from services.client.base import Connection
from services.client.meanings import Touches, cause_phrase, meaning
from services.client.times import check_at
from services.core import Cluster
from services.core.errors import NotFoundError, RejectedError, UnfoldableEventError, rule_error
from services.core.explain_placed import PlacementTrace, explain_placed, known_when_deciding, view_for_decision
from services.core.state import ClusterView
from services.runtime.log_reader import LogEntry
from services.runtime.views import load_view

SCHEDULER_SNAPSHOT = "scheduler"
"""The snapshot the scheduler saves (the fold of the whole log), which a replay may start from."""


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """An event of the log: its sequence (and `index` in the batch its message holds, 0 for a message of its own),
    when the log stored it (UTC), its type and what it means; `cause` says what another event it reacted to did
    (`n7 was added`), when it reacted to a node's change or to work leaving."""

    sequence: int
    time: datetime
    type: str
    meaning: str
    event: AnyEvent
    cause: str = ""
    index: int = 0


def logged(entry: LogEntry, cause: str = "") -> LoggedEvent:
    """A readable log entry as history shows it."""
    assert entry.event is not None
    moment = datetime.fromtimestamp(entry.time_ns / 1e9, UTC)
    event = entry.event
    return LoggedEvent(entry.sequence, moment, type(event).__name__, meaning(event), event, cause, entry.index)


class HistoryCalls(Connection):
    """History from the log: `history`, `watch`, `why(..., at=...)` and `why_placed`."""

    async def history(
        self,
        *,
        actor_id: str | None = None,
        node_id: str | None = None,
        vcluster_id: str | None = None,
        since: datetime | timedelta | None = None,
    ) -> list[LoggedEvent]:
        """The events that touched the actor, node and virtual cluster given (all of them), oldest first; with
        `since` (a time, or a span back from now), only those stored since then."""
        check_filter_ids(actor_id=actor_id, node_id=node_id, vcluster_id=vcluster_id)
        last = await self.bus.last_sequence()
        found: list[LoggedEvent] = []
        if last:
            async for event in self._touching(Touches(actor_id, node_id, vcluster_id), since, last):
                found.append(event)
        return found

    async def watch(
        self,
        *,
        actor_id: str | None = None,
        node_id: str | None = None,
        vcluster_id: str | None = None,
        since: datetime | timedelta | None = None,
    ) -> AsyncGenerator[LoggedEvent, None]:
        """Every new event that touches the actor, node and virtual cluster given, as it is appended (forever);
        with `since`, first the past ones stored since then (`since=timedelta.max`: the whole history)."""
        check_filter_ids(actor_id=actor_id, node_id=node_id, vcluster_id=vcluster_id)
        touches = Touches(actor_id, node_id, vcluster_id)
        if since is None:
            since = datetime.now(UTC)
        async for event in self._touching(touches, since, None):
            yield event

    async def _touching(
        self, touches: Touches, since: datetime | timedelta | None, last: int | None
    ) -> AsyncIterator[LoggedEvent]:
        """Events from the start of the log (up to `last`; None: on forever) that touch, stored since `since`."""
        from_ns = _since_ns(since)
        causes: dict[str, str] = {}
        async for entry in self.bus.read_log(1):
            event = entry.event
            if event is not None:
                if touches(event) and entry.time_ns >= from_ns:
                    yield logged(entry, causes.get(event.causation_id, ""))
                phrase = cause_phrase(event)
                if phrase and event.event_id:
                    causes[event.event_id] = phrase
            if last is not None and entry.sequence >= last and entry.last:
                return

    async def why_at(self, actor_id: str, at: int | datetime | str) -> Pending | Placed:
        """Why an actor waited, or where it ran, at `at` (a log sequence, or a time), as the scheduler explained
        it then: from the log folded up to that point."""
        sequence = await self.sequence_at(at)
        view = await self._view_at(sequence)
        try:
            return Cluster.from_view(view, self.settings.rare_resources).decision(actor_id)
        except NotFoundError:
            raise NotFoundError(f"actor_id {actor_id!r}: no such live actor at sequence {sequence}") from None

    async def why_placed(self, actor_id: str, top: int = 5) -> PlacementTrace:
        """How the actor's latest placement was decided, re-run on the view the scheduler had: the candidates,
        the nodes in and out per filter, the `top` scored nodes with each scorer's weight."""
        placed, sequence, index = await self._latest_placement(actor_id)

        def keep(entry: LogEntry) -> bool:
            return entry.event is not None and known_when_deciding(entry.sequence, entry.event, placed, sequence)

        view = await self._view_at(sequence, keep=keep, snapshot_until=placed.folded or sequence - 1, before=index)
        return explain_placed(view_for_decision(view, placed), placed, self.settings.rare_resources, top=top)

    async def _latest_placement(self, actor_id: str) -> tuple[ActorPlaced, int, int]:
        """The actor's newest `ActorPlaced`, its sequence and its index in its message (on the actor's subject, or
        in a batch of actor events: those are read whole, so this reads every batch of the log)."""
        found: tuple[ActorPlaced, int, int] | None = None
        async for entry in self.bus.read_held((s.event_subject(s.ACTOR, actor_id), s.batch_subject(s.ACTOR))):
            if isinstance(entry.event, ActorPlaced) and entry.event.actor_id == actor_id:
                found = entry.event, entry.sequence, entry.index
        if found is None:
            raise NotFoundError(f"actor_id {actor_id!r}: the log holds no placement of it")
        return found

    async def sequence_at(self, at: int | datetime | str) -> int:
        """The log sequence `at` names: a sequence as it is (refused past the log's end), a time as the newest
        event stored at or before it (refused before the first)."""
        point = check_at(at)
        last = await self.bus.last_sequence()
        if isinstance(point, int):
            if point > last:
                raise rule_error("at", at, f"is past the log's end (its newest sequence is {last})")
            return point
        wanted = point.timestamp() * 1e9
        found = 0
        if last:
            async for entry in self.bus.read_log(1):
                if entry.time_ns > wanted:
                    break
                found = entry.sequence
                if entry.sequence >= last:
                    break
        if not found:
            raise rule_error("at", at, "is before the log's first event")
        return found

    async def _view_at(
        self,
        sequence: int,
        *,
        keep: Callable[[LogEntry], bool] | None = None,
        snapshot_until: int | None = None,
        before: int | None = None,
    ) -> ClusterView:
        """The scheduler's view folded up to `sequence` (with `before`, only the events of that message before index
        `before`; only the entries `keep` accepts), from its snapshot when that is at or before `snapshot_until`
        (default: `sequence`), else from the start of the log."""
        view, start = await self._snapshot_before(sequence if snapshot_until is None else snapshot_until)
        if start > sequence:
            return view
        async for entry in self.bus.read_log(start):
            if entry.sequence > sequence:
                break
            wanted = entry.sequence < sequence or before is None or entry.index < before
            if wanted and entry.event is not None and (keep is None or keep(entry)):
                with contextlib.suppress(UnfoldableEventError):  # the services skip it alike
                    view.fold(entry.event)
            if entry.sequence == sequence and entry.last:
                break
        return view

    async def _snapshot_before(self, sequence: int) -> tuple[ClusterView, int]:
        """The scheduler's snapshot when it is sound and at or before `sequence`, and the sequence to read on
        from; else an empty view and 1."""
        from services.runtime.snapshots import SnapshotStore  # noqa: PLC0415 - Redis is imported by `--at` alone

        store = SnapshotStore(self.settings.redis_url, timeout=min(self.timeout, 2.0))
        try:
            found = await store.load(SCHEDULER_SNAPSHOT)
        finally:
            await store.close()
        if found is not None:
            log_id, log_end = await self.bus.log_identity()
            if found.refusal(SCHEDULER_SNAPSHOT, log_id, log_end) is None and int(found.sequence) <= sequence:
                with contextlib.suppress(ValueError):  # a blob that does not load: replay from the start instead
                    return load_view(found.blob, int(found.sequence)), int(found.sequence) + 1
        return ClusterView(self.settings.seed), 1


def _since_ns(since: datetime | timedelta | None) -> float:
    if since is None:
        return 0
    if isinstance(since, timedelta):
        try:
            since = datetime.now(UTC) - since
        except OverflowError:
            return 0
    if since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    return since.timestamp() * 1e9


def check_filter_ids(**ids: str | None) -> None:
    """Refuse an empty id filter (`--actor ""`): it would match nothing, which looks like no history."""
    for field, value in ids.items():
        if value is not None and not value.strip():
            raise RejectedError(f"{field} {value!r}: must not be empty")
