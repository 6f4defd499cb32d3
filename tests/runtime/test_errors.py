"""One exception tree: a refused request is a `RejectedError` with its wire kind; a bug is the service failing."""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest

from schemas import NodeDied
from schemas.commands import RegisterNode, SchedulerRequest, SubmitActor
from schemas.queries import TaintsQuery
from schemas.replies import Rejected, RejectionKind
from schemas.requests import ScheduleRequest
from services.client.errors import raise_for
from services.core.cluster import Cluster
from services.core.errors import (
    CodecError,
    ConflictError,
    CorralError,
    LabelError,
    NotFoundError,
    RejectedError,
    ServiceFailedError,
    UnavailableError,
    UnfoldableEventError,
)
from services.runtime.codec import decode, encode
from services.runtime.commands import CommandDesk, Outcome, rejection
from services.runtime.queries import query_handler
from services.scheduler import handlers
from services.scheduler.handlers import handle
from services.scheduler.view import SchedulerView

pytestmark = pytest.mark.anyio

NODE = RegisterNode(node_id="n1", resources={"CPU": 1.0})

BUGS = [ValueError("a bug"), KeyError("n1"), TypeError("a bug"), UnfoldableEventError(NodeDied("n1"), "a log fault")]
"""What a handler may raise by mistake: none of it is the sender's fault."""


def test_each_refusal_carries_its_wire_kind() -> None:
    refusals: list[tuple[RejectedError, RejectionKind]] = [
        (RejectedError("x"), "invalid"),
        (LabelError("x"), "invalid"),
        (CodecError("RegisterNode", "x"), "invalid"),
        (NotFoundError("x"), "not_found"),
        (ConflictError("x"), "conflict"),
    ]
    for error, kind in refusals:
        assert rejection(error) == Rejected(str(error), kind)
        assert isinstance(error, ValueError)


@pytest.mark.parametrize("bug", BUGS, ids=lambda bug: type(bug).__name__)
def test_a_bug_is_answered_as_the_service_failing(bug: Exception, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, "corral.commands"):
        reply = rejection(bug)
    assert reply.kind == "unavailable"
    assert reply.error.startswith(f"the service failed on this message ({type(bug).__name__}")
    assert caplog.records[-1].exc_info is not None  # logged with its trace


def test_the_client_raises_the_class_of_each_kind() -> None:
    raised: dict[str, type[CorralError]] = {}
    kinds: tuple[RejectionKind, ...] = ("invalid", "not_found", "conflict", "unavailable")
    for kind in kinds:
        with pytest.raises(CorralError) as caught:
            raise_for(Rejected("why", kind))
        assert str(caught.value) == "why"
        assert caught.value.kind == kind
        raised[kind] = type(caught.value)
    assert raised == {
        "invalid": RejectedError,
        "not_found": NotFoundError,
        "conflict": ConflictError,
        "unavailable": ServiceFailedError,
    }
    assert issubclass(ServiceFailedError, UnavailableError)
    assert not issubclass(ServiceFailedError, RejectedError | ValueError)


def desk() -> CommandDesk:
    """A desk whose handlers never get as far as appending (no bus or log is needed to refuse)."""
    bus = SimpleNamespace(settings=SimpleNamespace(max_message_bytes=1 << 20), no_room="")
    return CommandDesk(cast(Any, bus), cast(Any, None), "labels")


def message(value: object) -> Any:
    return SimpleNamespace(data=encode(value))


async def command_reply(handle: Callable[[RegisterNode], Outcome]) -> Rejected:
    """What the desk answers a RegisterNode with when `handle` raises."""
    reply: Rejected = decode(await desk().handler(RegisterNode, handle)(message(NODE)), Rejected)
    return reply


@pytest.mark.parametrize("bug", BUGS, ids=lambda bug: type(bug).__name__)
async def test_a_command_handler_bug_reaches_the_client_as_the_service_failing(bug: Exception) -> None:
    def buggy(_command: RegisterNode) -> Outcome:
        raise bug

    reply = await command_reply(buggy)
    with pytest.raises(ServiceFailedError, match=r"the service failed on this message"):
        raise_for(reply)


async def test_a_refused_command_reaches_the_client_as_refused() -> None:
    def refuse(command: RegisterNode) -> Outcome:
        raise NotFoundError(f"node_id {command.node_id!r}: no such node")

    reply = await command_reply(refuse)
    with pytest.raises(NotFoundError, match="node_id 'n1': no such node"):
        raise_for(reply)


@pytest.mark.parametrize("bug", BUGS, ids=lambda bug: type(bug).__name__)
async def test_a_query_handler_bug_reaches_the_client_as_the_service_failing(bug: Exception) -> None:
    def buggy(_query: TaintsQuery) -> Any:
        raise bug

    reply = decode(await query_handler(TaintsQuery, buggy)(message(TaintsQuery())), Rejected)
    with pytest.raises(ServiceFailedError, match=r"the service failed on this message"):
        raise_for(reply)


@pytest.mark.parametrize("bug", BUGS, ids=lambda bug: type(bug).__name__)
def test_a_scheduler_bug_is_not_answered_as_a_rejection(bug: Exception, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scheduler's requests: a bug propagates to the consumer, which sets the request aside as poison."""
    view = SchedulerView(0, ())

    def buggy(_cluster: Cluster, _request: SchedulerRequest) -> Any:
        raise bug

    monkeypatch.setattr(handlers, "_apply", buggy)  # the core's own classes take no patch once compiled
    with pytest.raises(type(bug)):
        handle(view, SubmitActor(request=ScheduleRequest("a1", {"CPU": 1.0})))


def test_a_refused_scheduler_request_is_answered_as_refused() -> None:
    view = SchedulerView(0, ())
    reply = handle(view, SubmitActor(request=ScheduleRequest("a1", {"CPU": -1.0})))
    assert isinstance(reply, Rejected)
    assert reply.kind == "invalid"
