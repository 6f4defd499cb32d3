"""The gateway's feed keeps the events of one batch message together: a stream takes a batch whole, the window is
never cut inside one, and the feed reads past a batch's sequence only once all of it is in."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from schemas import ActorRemoved
from services.client import Client
from services.gateway import feed as feed_module
from services.gateway.feed import Feed, rendered
from services.runtime.codec import encode
from services.runtime.log_reader import LogEntry


def entries(sequence: int, count: int) -> list[LogEntry]:
    """The entries of one message: `count` removals at `sequence` (a batch when more than one)."""
    found = []
    for index in range(count):
        event = ActorRemoved(actor_id=f"a{sequence}-{index}", event_id=f"e{sequence}-{index}")
        found.append(LogEntry(sequence, event, encode(event), index=index, last=index == count - 1))
    return found


def feed_of(window: int) -> Feed:
    return Feed(cast(Client, object()), window)


def test_the_feed_reads_past_a_batch_only_once_all_of_it_is_in() -> None:
    feed = feed_of(window=100)
    first, second, third = entries(5, 3)
    feed._add(first, rendered(first))
    feed._add(second, rendered(second))
    assert feed.next == 0, "a reader started again from here would skip the rest of the batch"
    feed._add(third, rendered(third))
    assert feed.next == 6


def test_a_stream_takes_a_batch_whole_even_past_its_share_of_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(feed_module, "BATCH_EVENTS", 2)
    feed = feed_of(window=100)
    log = entries(1, 1) + entries(2, 3) + entries(3, 1)
    for entry in log:
        feed._add(entry, rendered(entry))
    with feed.reading(1, asyncio.Event()) as reader:
        first = feed.take(reader)
        assert first == b"".join(rendered(entry) for entry in log[:4])  # 1, then all of 2
        assert reader.position == 3
        assert feed.take(reader) == rendered(log[4])


def test_the_window_is_never_cut_inside_a_batch() -> None:
    feed = feed_of(window=3)
    log = entries(1, 2) + entries(2, 3) + entries(3, 2)  # the third add past twice the window cuts it
    for entry in log:
        feed._add(entry, rendered(entry))
    assert feed.covered_from == 2
    with feed.reading(feed.covered_from, asyncio.Event()) as reader:
        assert feed.take(reader) == b"".join(rendered(entry) for entry in log[2:])
