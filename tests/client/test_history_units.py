"""History without servers: a meaning for every event type, the story lines, and `--since` / `--at` parsing (fuzzed:
a bad value is refused with the flag, the value and the rule, never another error)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas import (
    ActorFailed,
    ActorPending,
    ActorPlaced,
    ActorSubmitted,
    AnyEvent,
    Explanation,
    NodeRegistered,
    ScheduleRequest,
    VirtualClusterDestroyed,
)
from services.cli.__main__ import main
from services.cli.history import history_lines
from services.client.history import LoggedEvent
from services.client.meanings import MEANINGS, Touches, meaning
from services.client.times import check_at, parse_at, parse_since
from services.core.errors import RejectedError

NOON = datetime(2026, 11, 26, 12, 1, 3, tzinfo=UTC)


def test_every_event_type_of_the_schemas_has_a_meaning() -> None:
    assert set(MEANINGS) == set(get_args(AnyEvent))


def test_a_meaning_is_one_line() -> None:
    pending = ActorPending(actor_id="a", explanation=Explanation(2, "0/2 nodes\nare available."))
    assert meaning(pending) == "actor a pending: 0/2 nodes are available."
    assert meaning(NodeRegistered(node_id="n1", resources={"CPU": 4}, labels={})) == "node n1 joined with CPU=4"


def logged(event: AnyEvent, seconds: int, cause: str = "") -> LoggedEvent:
    return LoggedEvent(0, NOON + timedelta(seconds=seconds), type(event).__name__, meaning(event), event, cause)


def test_history_lines_tell_an_actors_story() -> None:
    story = [
        logged(ActorSubmitted(request=ScheduleRequest("a", {"CPU": 1})), 0),
        logged(ActorPending(actor_id="a", explanation=Explanation(12, "0/12 nodes are available: x.")), 0),
        logged(ActorPlaced(actor_id="a", node_id="n4"), 6, "n7 was added"),
        logged(ActorFailed(actor_id="a", node_id="n4", reason="node n4 died", will_restart=True), 9),
        logged(ActorPlaced(actor_id="a", node_id="n2"), 9, "n4 died"),
        logged(VirtualClusterDestroyed(vc_id="vc1", stopped=["a"]), 10),
    ]
    assert history_lines(story, now=NOON) == [
        "12:01:03  submitted",
        "12:01:03  pending: 0/12 nodes are available: x.",
        "12:01:09  placed on n4 after n7 was added",
        "12:01:12  failed with n4 (node n4 died)",
        "12:01:12  restarted on n2 after n4 died",
        "12:01:13  virtual cluster vc1 destroyed, stopping a",
    ]
    assert history_lines(story[:1], now=NOON + timedelta(days=1)) == ["2026-11-26 12:01:03  submitted"]


def test_touches_follows_the_work_of_a_virtual_cluster() -> None:
    touches = Touches(vcluster_id="vc1")
    assert touches(ActorSubmitted(request=ScheduleRequest("in", vcluster_id="vc1")))
    assert not touches(ActorSubmitted(request=ScheduleRequest("out")))
    assert touches(ActorPlaced(actor_id="in", node_id="v0"))
    assert not touches(ActorPlaced(actor_id="out", node_id="n0"))


@pytest.mark.parametrize(
    ("text", "span"),
    [("10m", timedelta(minutes=10)), ("1h30m", timedelta(minutes=90)), ("2d", timedelta(days=2)), ("45s", None)],
)
def test_since_reads_spans(text: str, span: timedelta | None) -> None:
    assert parse_since(text) == (span or timedelta(seconds=45))


def test_at_reads_a_sequence_a_time_of_day_or_an_iso_time() -> None:
    assert parse_at("42") == 42
    assert parse_at("12:01:03", today=NOON) == NOON
    assert parse_at("2026-11-26T12:01:03Z") == NOON
    assert parse_at("2026-11-26 12:01:03") == NOON


def test_the_clients_at_refuses_what_is_no_point_in_the_log() -> None:
    for bad in (0, -3, True, 2.5):
        with pytest.raises(RejectedError, match=r"^at "):
            check_at(bad)  # type: ignore[arg-type]
    assert check_at(datetime(2026, 11, 26, 12, 1, 3)) == NOON  # a naive time is UTC


@given(st.text(max_size=30))
def test_any_since_is_a_span_or_refused_naming_the_flag(text: str) -> None:
    try:
        span = parse_since(text, "--since")
    except RejectedError as error:
        assert str(error).startswith(f"--since {repr(text)[:20]}") and ": must be" in str(error)
    else:
        assert timedelta(0) < span <= timedelta(days=36_500)


@given(st.one_of(st.text(max_size=40), st.integers().map(str), st.datetimes().map(datetime.isoformat)))
def test_any_at_is_a_point_or_refused_naming_the_flag(text: str) -> None:
    try:
        point = parse_at(text, "--at")
    except RejectedError as error:
        assert str(error).startswith(f"--at {repr(text)[:20]}") and "must be" in str(error)
    else:
        assert (isinstance(point, int) and point >= 1) or (isinstance(point, datetime) and point.tzinfo is not None)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["events", "--since", "10x"], "--since '10x': must be a duration such as 30s, 10m, 2h"),
        (["events", "--since", "0s"], "--since '0s': must be longer than 0s"),
        (["events", "--actor", ""], "--actor '': must not be empty"),
        (["why", "a", "--at", "soon"], "--at 'soon': must be a log sequence (a whole number from 1) or a UTC time"),
        (["why", "a", "--at", "0"], "--at '0': a sequence must be from 1"),
        (["why-placed", "a", "--top", "0"], "--top 0: must be at least 1"),
    ],
)
def test_a_bad_flag_is_bad_usage_naming_it_before_anything_connects(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--nats-url", "nats://127.0.0.1:1", "--timeout", "0.2"])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "options"),
    [
        (["events"], ["--actor", "--node", "--vc", "--since", "--follow", "--output"]),
        (["why-placed"], ["--top", "--output"]),
        (["why"], ["--at"]),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) and len(value) == 1 else "",
)
def test_the_history_commands_have_help_naming_their_options(
    argv: list[str], options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: corral {argv[0]}")
    assert all(option in out for option in [*options, "--nats-url"])
