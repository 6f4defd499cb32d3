"""`python -m loadtest --batch K`: the option's refusals, and every request of a batch counted as one request (against
a target that answers at once: no mesh, nothing timed but the batches' round trips)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Sequence
from typing import cast

import pytest

from loadtest.cli import main
from loadtest.floor.decider import DeciderFigures, NoOpDecider, combined
from loadtest.floor.drive import shares
from loadtest.harness import _phase
from loadtest.leader_steps import main as leader_steps_main
from loadtest.report import Goal, Phase, format_report
from loadtest.stats import Recorder
from loadtest.tenants import tenant_specs
from loadtest.transport import Connection, Result, _decided_batch
from loadtest.transport import Outcome as Answer
from loadtest.users import Drive, Outcome, closed_loop, open_loop
from loadtest.workloads import REMOVE, SMALL
from schemas import Pending, Placed, ScheduleRequest
from schemas.commands import MAX_BATCH, RemoveActor, RequestBatch, SchedulerRequest, SubmitActor
from schemas.replies import Accepted, BatchReply, Rejected
from services.runtime.bus import Bus
from services.runtime.codec import decode, encode
from tests.loadtest.reports import phase, report_of

ROUND_TRIP_S = 0.002
"""How long the fake target takes to answer one message (alone or a batch)."""
NO_CONNECTION = cast(Connection, None)
"""The fake target never touches its connection."""


class Answers:
    """A target that answers every message after `ROUND_TRIP_S`: submits placed, removes accepted; it keeps each
    message's requests."""

    name = "answers"
    description = "answers at once"

    def __init__(self) -> None:
        self.submits: list[list[ScheduleRequest]] = []
        self.removes: list[list[str]] = []
        self.placing_started: list[float] = []
        """When each message of submits was published (the time the recorder sorts by, inside or outside its window)."""

    async def _answered(self, count: int, outcome: Answer) -> list[Result]:
        started = time.perf_counter()
        if outcome == "placed":
            self.placing_started.append(started)
        await asyncio.sleep(ROUND_TRIP_S)
        return [Result(started, time.perf_counter(), outcome)] * count

    async def submit(self, conn: Connection, request: ScheduleRequest) -> Result:
        self.submits.append([request])
        return (await self._answered(1, "placed"))[0]

    async def remove(self, conn: Connection, actor_id: str) -> Result:
        self.removes.append([actor_id])
        return (await self._answered(1, "accepted"))[0]

    async def submit_many(self, conn: Connection, requests: Sequence[ScheduleRequest]) -> list[Result]:
        self.submits.append(list(requests))
        return await self._answered(len(requests), "placed")

    async def remove_many(self, conn: Connection, actor_ids: Sequence[str]) -> list[Result]:
        self.removes.append(list(actor_ids))
        return await self._answered(len(actor_ids), "accepted")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--batch", "0"], "argument --batch: '0' must be 1 or more"),
        (["--batch", "-5"], "argument --batch: '-5' must be 1 or more"),
        (["--batch", "1001"], "argument --batch: '1001' must be at most 1,000 (the most requests one corral.req.batch"),
        (["--batch", "2.5"], "argument --batch: '2.5' is not a whole number"),
        (["--batch", "ten"], "argument --batch: 'ten' is not a whole number"),
    ],
)
def test_a_bad_batch_size_is_refused_naming_the_option_the_value_and_the_rule(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in (main, leader_steps_main):
        with pytest.raises(SystemExit) as refused:
            command(argv)
        assert refused.value.code == 2 and says in capsys.readouterr().err


def test_a_drive_outside_the_batch_limits_is_refused() -> None:
    for size in (0, MAX_BATCH + 1):
        with pytest.raises(ValueError, match=f"batch {size} must be 1 to 1,000 requests"):
            Drive(tag="t", users=1, seconds=1.0, warmup=0.0, hold=1, batch=size)


def test_closed_loop_users_send_batches_and_every_request_counts_as_one() -> None:
    """Three users' submits ten at a time; removals in batches, one per placement beyond the hold; every figure
    (requests, placements, removes, requests/s, CPU per request and per placement) counts requests, not messages."""
    drive = Drive(tag="b", users=3, seconds=0.3, warmup=0.0, hold=15, seed=4, batch=10)
    target = Answers()
    recorder, outcome = asyncio.run(closed_loop(target, [NO_CONNECTION], drive))

    assert target.submits and all(len(sent) == 10 for sent in target.submits)
    assert target.removes and all(1 <= len(sent) <= 10 for sent in target.removes)
    submitted = sum(len(sent) for sent in target.submits)
    removed = sum(len(sent) for sent in target.removes)
    assert removed == submitted - len(outcome.held) > len(target.removes)  # one removal per placement beyond the hold
    assert len(outcome.held) <= drive.users * (drive.hold + drive.batch)
    assert sum(tally.requests for tally in recorder.tallies.values()) + recorder.outside == submitted + removed

    cpu = {"scheduler": 0.5, "loadtest": 0.25}
    figures = _phase("corral", target, drive, recorder, Outcome(), cpu)
    placed, removes = recorder.rows([])[-1]["placed"], recorder.tallies[REMOVE].requests
    assert figures["batch"] == 10 and figures["errors"] == 0
    assert (figures["placements"], figures["removes"], figures["requests"]) == (placed, removes, placed + removes)
    assert placed == 10 * _inside(recorder, target.placing_started)  # a batch sent after the window: outside
    assert figures["requests_per_s"] == round((placed + removes) / figures["seconds"], 1)
    costs = figures["costs"]
    assert costs["serial_request_us"] == round(0.5e6 / figures["requests_per_s"], 1)
    assert costs["serial_us"] == round(0.5e6 / figures["placements_per_s"], 1)
    # each request's latency is its batch's round trip: every one at least one trip long
    assert figures["latency_ms"]["p50"] >= ROUND_TRIP_S * 1000
    assert len(recorder.placed_latencies_ms) == placed

    # the same workloads, in the same order, as a user sending one request at a time draws them
    single = Answers()
    asyncio.run(closed_loop(single, [NO_CONNECTION], dataclasses.replace(drive, batch=1)))
    alone = [request for sent in single.submits for request in sent if request.actor_id.startswith("bu0-")]
    batched = [request for sent in target.submits for request in sent if request.actor_id.startswith("bu0-")]
    common = min(len(alone), len(batched))
    assert common >= 10 and alone[:common] == batched[:common]


def test_the_open_loop_sends_rate_over_k_batches_per_second() -> None:
    drive = Drive(tag="o", users=4, seconds=0.5, warmup=0.0, hold=5, rate=2000.0, batch=20)
    target = Answers()
    recorder, outcome = asyncio.run(open_loop(target, [NO_CONNECTION], drive, drain_timeout=2.0))

    assert 40 <= len(target.submits) <= 51  # 2,000/s over 0.5 s in batches of 20: 50 batches
    assert all(len(sent) == 20 for sent in target.submits)
    assert all(1 <= len(sent) <= 20 for sent in target.removes)
    submitted = sum(len(sent) for sent in target.submits)
    removed = sum(len(sent) for sent in target.removes)
    assert removed == submitted - len(outcome.held) and len(outcome.held) == drive.users * drive.hold
    total = recorder.rows([])[-1]  # a batch published after the window's end is counted outside it, request by request
    assert total["requests"] + recorder.outside == submitted + removed
    # a batch published after the window's end (late when the machine is busy) is counted outside, whole
    assert total["placed"] == 20 * _inside(recorder, target.placing_started) >= 20
    assert outcome.dropped == outcome.unfinished == 0


def _inside(recorder: Recorder, published: list[float]) -> int:
    """How many of the messages published at these times fall in the recorder's window."""
    return sum(recorder.start <= at < recorder.end for at in published)


def test_a_floor_share_keeps_the_batch_size_across_processes() -> None:
    drive = Drive(tag="t", users=5, seconds=1.0, warmup=0.0, hold=1, batch=25)
    for part in shares(drive, 2):
        assert part.batch == 25
        assert Drive(**json.loads(json.dumps(dataclasses.asdict(part)))) == part  # as the generator reads it


def _answered(replies: list[Placed | Pending | Accepted | Rejected]) -> list[Result]:
    async def fake_request(*_: object) -> tuple[float, float, bytes]:
        return 1.0, 1.25, encode(BatchReply(replies))

    requests: list[SchedulerRequest] = [
        SubmitActor(request=ScheduleRequest("a", {"CPU": 1.0})),
        RemoveActor(actor_id="b"),
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("loadtest.transport.durable_request", fake_request)
        return asyncio.run(_decided_batch(NO_CONNECTION, "corral.req.batch", requests, 1.0))


def test_a_batch_reply_gives_one_result_per_request_each_timed_as_the_round_trip() -> None:
    results = _answered([Placed("a", "n1"), Accepted(message="removed")])
    assert [(r.outcome, r.started, r.finished) for r in results] == [("placed", 1.0, 1.25), ("accepted", 1.0, 1.25)]
    assert [r.outcome for r in _answered([Placed("a", "n1"), Rejected("no such actor")])] == ["placed", "error"]
    short = _answered([Placed("a", "n1")])
    assert [r.outcome for r in short] == ["error", "error"] and "1 answers to a batch of 2 requests" in short[0].detail


def test_the_no_op_decider_answers_a_batch_with_one_no_op_answer_per_request() -> None:
    decider = NoOpDecider(cast(Bus, None))
    batch = RequestBatch(
        requests=[
            SubmitActor(request=ScheduleRequest("a", {"CPU": 1.0})),
            RemoveActor(actor_id="b"),
            SubmitActor(request=ScheduleRequest("c", {"CPU": 1.0})),
        ]
    )
    data, count = decider.batch_answer(encode(batch))
    assert count == 3
    reply = decode(data, BatchReply)
    assert [type(one) for one in reply.replies] == [Placed, Accepted, Placed]
    assert decider.batch_answer(b"not json") == (decider.accepted, 1)


def test_the_floor_figures_count_requests_and_messages_apart() -> None:
    one = DeciderFigures(
        batches=2, requests=40, messages=4, request_batches=4, mean_batch=2.0, mean_batch_ms=1.0, busy_share=0.5
    )
    figures = combined([one, one])
    assert (figures["requests"], figures["messages"], figures["request_batches"]) == (80, 8, 8)
    assert figures["mean_batch"] == 2.0  # messages per fetch


def test_the_report_says_the_batch_size_of_each_phase_that_batched() -> None:
    rows = Recorder(0.0, 1.0).rows([])
    batched: Phase = {**phase("corral", 1000), "batch": 20, "rows": rows}
    alone: Phase = {**phase("fixed_rate", 500), "rows": rows}
    report = report_of([Goal(name="throughput", goal="a goal", measured="not run", met=None)])
    report["phases"] = {"corral": batched, "fixed_rate": alone}
    text = format_report(report)
    headings = [line for line in text.splitlines() if line.startswith("== ")]
    assert headings[0].endswith("(1 users, closed loop, batches of 20 requests per message, 1.0 s measured)")
    assert "batches of" not in headings[1]


def test_tenants_get_room_for_what_a_user_sending_batches_holds_at_once() -> None:
    """Each tenant's flexible maximum is its minimum plus 16 CPUs, and with batches of K, room for the K - 1 more
    small requests a user holds at once: the phase measures scheduling inside clusters, not clusters at their
    quota, whatever the batch size."""
    alone, batched = tenant_specs(20, "t", 3), tenant_specs(20, "t", 3, batch=20)
    for one, many in zip(alone, batched, strict=True):
        minimum = one.spec.flexible_resource_min["CPU"]
        assert one.spec.flexible_resource_max["CPU"] == minimum + 16
        assert many.spec.flexible_resource_max["CPU"] == minimum + 16 + 19 * SMALL["CPU"]
        assert (many.spec.flexible_resource_min, many.spec.fixed_size_nodes) == (
            one.spec.flexible_resource_min,
            one.spec.fixed_size_nodes,
        )


class Silent(Answers):
    """A target whose batches are never answered."""

    async def submit_many(self, conn: Connection, requests: Sequence[ScheduleRequest]) -> list[Result]:
        self.submits.append(list(requests))
        await asyncio.Event().wait()
        raise AssertionError("never answered")


def test_the_open_loop_counts_requests_of_batches_left_unfinished_and_dropped() -> None:
    """Batches nobody answers: past the cap on requests in flight further batches are dropped, and at the end those
    still out are unfinished; both count requests, as every other figure does, not messages."""
    drive = Drive(tag="o", users=2, seconds=0.3, warmup=0.0, hold=5, rate=1000.0, batch=10, max_in_flight=50)
    target = Silent()
    _recorder, outcome = asyncio.run(open_loop(target, [NO_CONNECTION], drive, drain_timeout=0.1))
    assert len(target.submits) == 5  # 50 requests in flight at most: 5 batches of 10
    assert outcome.unfinished == 50
    assert outcome.dropped > 0 and outcome.dropped % 10 == 0
