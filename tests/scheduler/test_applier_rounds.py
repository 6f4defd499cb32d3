"""How the applier groups proposal batches into rounds: in order, at most `PROPOSALS_AT_ONCE` proposals each, and
each round handed over before the batches after it are taken (decoded)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterable
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nats.aio.msg import Msg

from schemas.commands import RemoveActor
from schemas.proposals import Proposal, Proposals, Verdicts
from schemas.replies import Rejected
from services.runtime.codec import decode
from services.scheduler import applier as applier_module
from services.scheduler.applier import PROPOSALS_AT_ONCE, Applier, rounds
from tests.support.examples import examples

Batch = tuple[Msg, Proposals]


def _batch(index: int, size: int) -> Batch:
    proposal = Proposal(RemoveActor(actor_id="a"), index)
    return Msg(None, subject=f"b{index}"), Proposals(f"w{index}", 0, [proposal] * size)  # type: ignore[arg-type]


def _grouped(batches: Iterable[Batch], taken: list[int] | None = None) -> list[list[Batch]]:
    """The rounds of `batches`; `taken[i]` is how many batches had been taken when round `i` was handed over."""

    async def collect() -> list[list[Batch]]:
        grouped: list[list[Batch]] = []
        consumed = 0

        async def counted() -> AsyncIterator[Batch]:
            nonlocal consumed
            for batch in batches:
                consumed += 1
                yield batch

        async for group in rounds(counted()):
            grouped.append(group)
            if taken is not None:
                taken.append(consumed)
        return grouped

    # not asyncio.run: on Python 3.11 it formats its task's repr, which reaches every batch, when it installs its
    # SIGINT handler (a tenth of a second for 20 batches of 12,000 proposals)
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(collect())
    finally:
        loop.close()


@settings(max_examples=examples(100))
@given(st.lists(st.integers(0, 3 * PROPOSALS_AT_ONCE), max_size=20))
def test_rounds_keep_the_order_and_the_limit_and_only_a_bigger_batch_stands_alone(sizes: list[int]) -> None:
    batches = [_batch(index, size) for index, size in enumerate(sizes)]
    grouped = _grouped(batches)
    assert [batch for group in grouped for batch in group] == batches
    for group in grouped:
        total = sum(len(batch.proposals) for _msg, batch in group)
        assert total <= PROPOSALS_AT_ONCE or len(group) == 1
    for first, second in itertools.pairwise(grouped):  # no round could have taken the next one's first
        assert sum(len(batch.proposals) for _msg, batch in [*first, second[0]]) > PROPOSALS_AT_ONCE


@settings(max_examples=examples(100))
@given(st.lists(st.integers(0, 3 * PROPOSALS_AT_ONCE), min_size=1, max_size=20))
def test_a_round_is_handed_over_before_any_batch_after_the_next_is_taken(sizes: list[int]) -> None:
    """The applier decodes a batch when `rounds` takes it: a round must be applied (the event loop given a turn)
    before later batches are decoded, or 64 batches of 1 MB stall the leader past its lease."""
    taken: list[int] = []
    grouped = _grouped((_batch(index, size) for index, size in enumerate(sizes)), taken)
    handed = itertools.accumulate(len(group) for group in grouped)
    assert all(consumed <= seen + 1 for consumed, seen in zip(taken, handed, strict=True))


def test_eight_floods_are_eight_rounds_and_small_batches_share_one() -> None:
    assert [len(group) for group in _grouped(_batch(i, 13_000) for i in range(8))] == [1] * 8
    assert [len(group) for group in _grouped(_batch(i, 256) for i in range(64))] == [16, 16, 16, 16]


class Writer:
    """The applier's writer: records, at each append, how many turns the event loop had taken."""

    def __init__(self, turns: list[int]) -> None:
        self.lock, self.confirmed, self.turns = asyncio.Lock(), 0, turns
        self.appended_at: list[int] = []

    async def flush(self) -> int:
        self.appended_at.append(len(self.turns))
        return 0


def test_a_batch_over_the_limit_is_decided_in_parts_with_the_event_loop_turning_between_and_answered_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    size = 2 * PROPOSALS_AT_ONCE + 5
    answers: list[Verdicts] = []

    async def send_reply(_bus: object, _subject: str, _reply: str, data: bytes) -> None:
        answers.append(decode(data, Verdicts))

    async def guarded(_subject: str, _data: object, decide: object, _sequence: object) -> tuple[Rejected, bool]:
        return Rejected("actor a is not known", "not_found"), False

    async def elected(_appended_from: int) -> None:
        return None

    async def apply_beside_a_ticker() -> Writer:
        turns: list[int] = []
        writer = Writer(turns)

        async def ticker() -> None:
            while True:
                turns.append(1)
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        shell = SimpleNamespace(bus=SimpleNamespace(nc=SimpleNamespace(max_payload=1 << 20)))
        view = SimpleNamespace(deposed=lambda: False, sequence=0)
        applier = Applier(shell, view, writer, elected, guarded)  # type: ignore[arg-type]
        msg, batch = _batch(0, size)
        msg.reply = "inbox"
        await applier.apply([(msg, batch)])
        task.cancel()
        return writer

    monkeypatch.setattr(applier_module, "send_reply", send_reply)
    writer = asyncio.run(apply_beside_a_ticker())
    assert len(writer.appended_at) == 3  # 4,096 + 4,096 + 5
    assert writer.appended_at == sorted(set(writer.appended_at))  # the loop turned between the parts
    assert len(answers) == 1 and len(answers[0].verdicts) == size
    assert {verdict.reply for verdict in answers[0].verdicts} == {Rejected("actor a is not known", "not_found")}
