"""The event log in a list, for unit tests of the scheduler's writer and leader (as Nomad's tests stand a fake
planner in for Raft): appends get sequences, a follower folds on demand, an append can fail or come back stored."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from types import SimpleNamespace
from typing import TypeVar, cast

from nats.aio.msg import Msg

from schemas import AnyEvent
from schemas.subjects import subject_of
from services.runtime.log_reader import Recognise
from services.runtime.service import Shell
from services.scheduler.view import SchedulerView

R = TypeVar("R")


class FakeBus:
    """Appends to `log` (sequence = index + 1); `failing` makes the next appends raise, `stored_at` makes the next
    one answer these sequences instead (a repeat the stream stored before); `before_ack` runs once the events are
    stored, before the append returns (a follower reading their echo first)."""

    def __init__(self, log: list[AnyEvent]) -> None:
        self.log = log
        self.settings = SimpleNamespace(replicas=1)
        self.js = object()
        self.recognise: Recognise | None = None
        self.failing: Exception | None = None
        self.stored_at: list[int] | None = None
        self.before_ack: Callable[[], None] = lambda: None

    async def append(self, events: Sequence[AnyEvent], *, batched: bool = False) -> list[int]:
        """Store `events` at the end of the log, in order; their sequences (each its own, `batched` or not)."""
        if self.failing is not None:
            raise self.failing
        if self.stored_at is not None:
            stored, self.stored_at = self.stored_at, None
            return stored
        first = len(self.log) + 1
        self.log.extend(events)
        self.before_ack()
        return list(range(first, first + len(events)))

    async def with_retries(self, step: Callable[[], Awaitable[R]], _what: str) -> R:
        """One try: the fake never fails a read."""
        return await step()


class FakeFollower:
    """Folds the log into `view` when asked, handing the leader's own events back as the real reader does (through
    the bus's `recognise`)."""

    def __init__(self, view: SchedulerView, bus: FakeBus) -> None:
        self.view, self.bus = view, bus
        self.log_checks = 0

    async def wait_patiently(self, sequence: int, _why: str) -> None:
        """Fold up to `sequence`."""
        self.fold_to(sequence)

    async def caught_up(self, *, patient: bool = False) -> None:
        """Fold the whole log."""
        self.fold_to(len(self.bus.log))

    async def check_log(self) -> None:
        """Count the checks of the log's identity (a repeat was stored at a folded sequence)."""
        self.log_checks += 1

    def fold_to(self, sequence: int) -> None:
        """Fold every event after the view's sequence up to `sequence`."""
        while self.view.sequence < sequence:
            event = self.bus.log[self.view.sequence]
            own = self.bus.recognise(_message_of(event)) if self.bus.recognise else None
            self.view.fold(own or event, self.view.sequence + 1)


def _message_of(event: AnyEvent) -> Msg:
    return Msg(cast("object", None), subject=subject_of(event), headers={"Nats-Msg-Id": event.event_id})  # type: ignore[arg-type]


def fake_shell(log: list[AnyEvent], view: SchedulerView) -> tuple[Shell, FakeBus, FakeFollower]:
    """A shell on `log` for `view`: the shell, its bus and its follower."""
    bus = FakeBus(log)
    follower = FakeFollower(view, bus)
    return cast(Shell, SimpleNamespace(bus=bus, follower=follower)), bus, follower
