"""A service collects garbage far less often than Python's default, and gives the thresholds back when it stops."""

from __future__ import annotations

import gc

import pytest

from services.runtime.collector import YOUNG_COLLECTION_AT, collecting_less


def young_collections_while_keeping(objects: int) -> int:
    """How many times the youngest generation was collected while `objects` new containers were kept alive."""
    before: int = gc.get_stats()[0]["collections"]
    kept: list[list[None]] = [[] for _ in range(objects)]  # lists are always tracked by the collector
    collections: int = gc.get_stats()[0]["collections"] - before
    del kept
    return collections


def test_a_burst_of_allocations_sets_off_few_collections_inside_and_the_default_comes_back() -> None:
    default = gc.get_threshold()
    assert gc.isenabled() and default[0] < YOUNG_COLLECTION_AT
    outside = young_collections_while_keeping(100_000)
    with collecting_less():
        assert gc.get_threshold() == (YOUNG_COLLECTION_AT, *default[1:])
        inside = young_collections_while_keeping(100_000)
    assert gc.get_threshold() == default
    assert outside >= 100_000 // default[0] // 2  # about one collection per threshold's worth of new objects
    assert inside <= 100_000 // YOUNG_COLLECTION_AT + 1


def test_the_thresholds_come_back_when_the_block_fails() -> None:
    default = gc.get_threshold()
    with pytest.raises(RuntimeError), collecting_less():
        raise RuntimeError("the service failed")
    assert gc.get_threshold() == default
