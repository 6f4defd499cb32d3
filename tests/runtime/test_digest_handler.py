"""A service's digest is taken only while its view is a fold of the log: a leader's decisions are in its view
before the log holds them, and a digest taken then would differ from every replay at the same sequence."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from schemas.queries import DigestQuery, DigestReply
from schemas.replies import Rejected
from services.runtime.codec import decode, encode
from services.runtime.service import digest_handler

pytestmark = pytest.mark.anyio


def query() -> Any:
    """A digest query as the bus hands it to the handler."""
    return cast(Any, SimpleNamespace(data=encode(DigestQuery())))


async def test_the_digest_waits_until_the_leaders_decisions_are_stored_and_read_back() -> None:
    polls = {"count": 0}

    def ready() -> bool:
        polls["count"] += 1
        return polls["count"] > 3  # the writer settles after a few polls

    def digest() -> DigestReply:
        return DigestReply(f"taken after poll {polls['count']}", 7)

    answer = decode(await digest_handler(digest, ready)(query()), DigestReply | Rejected)
    assert answer == DigestReply("taken after poll 4", 7)


async def test_a_view_that_never_settles_answers_its_digest_after_the_patience() -> None:
    answer = decode(
        await digest_handler(lambda: DigestReply("as it is", 1), lambda: False, patience=0.05)(query()),
        DigestReply | Rejected,
    )
    assert answer == DigestReply("as it is", 1)
