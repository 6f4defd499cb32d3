"""How the applier groups proposal batches into rounds: in order, at most `PROPOSALS_AT_ONCE` proposals each."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st
from nats.aio.msg import Msg

from schemas.commands import RemoveActor
from schemas.proposals import Proposal, Proposals
from services.scheduler.applier import PROPOSALS_AT_ONCE, rounds


def _batch(index: int, size: int) -> tuple[Msg, Proposals]:
    proposal = Proposal(RemoveActor(actor_id="a"), index)
    return Msg(None, subject=f"b{index}"), Proposals(f"w{index}", 0, [proposal] * size)  # type: ignore[arg-type]


@given(st.lists(st.integers(0, 3 * PROPOSALS_AT_ONCE), max_size=20))
def test_rounds_keep_the_order_and_the_limit_and_only_a_bigger_batch_stands_alone(sizes: list[int]) -> None:
    batches = [_batch(index, size) for index, size in enumerate(sizes)]
    grouped = rounds(batches)
    assert [batch for group in grouped for batch in group] == batches
    for group in grouped:
        total = sum(len(batch.proposals) for _msg, batch in group)
        assert total <= PROPOSALS_AT_ONCE or len(group) == 1
    for first, second in itertools.pairwise(grouped):  # no round could have taken the next one's first
        assert sum(len(batch.proposals) for _msg, batch in [*first, second[0]]) > PROPOSALS_AT_ONCE


def test_eight_floods_are_eight_rounds_and_small_batches_share_one() -> None:
    assert [len(group) for group in rounds([_batch(i, 13_000) for i in range(8)])] == [1] * 8
    assert [len(group) for group in rounds([_batch(i, 256) for i in range(64)])] == [16, 16, 16, 16]
