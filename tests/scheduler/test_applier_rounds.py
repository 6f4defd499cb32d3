"""How the applier groups proposal batches into rounds: in order, at most `PROPOSALS_AT_ONCE` proposals each, and
each round handed over before the batches after it are taken (decoded)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterable

from hypothesis import given
from hypothesis import strategies as st
from nats.aio.msg import Msg

from schemas.commands import RemoveActor
from schemas.proposals import Proposal, Proposals
from services.scheduler.applier import PROPOSALS_AT_ONCE, rounds

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

    return asyncio.run(collect())


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
