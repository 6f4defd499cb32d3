"""Forged dead letters of events (any text in the sequence and index headers, on a real nats-server): the newest
one, which a service reads at start, and `corral dead-letters` read those headers as whole numbers, 0 for anything
else, and never fail."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import subjects as s
from services.client import Client
from services.local.mesh import Mesh
from services.runtime.bus import Bus
from services.runtime.codec import encode
from services.runtime.settings import Settings
from tests.support.examples import examples

pytestmark = pytest.mark.integration

HEADER_TEXT = st.one_of(
    st.sampled_from(["\u00b2", "\u0663", "-3", "1e3", "7", "", "9" * 40, "0x10"]),
    st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp")), max_size=12),
)


def whole(text: str) -> int:
    return int(text) if text.isascii() and text.isdigit() else 0


def test_forged_dead_letter_headers_read_as_whole_numbers_or_zero(servers: Mesh) -> None:
    loop = asyncio.new_event_loop()
    bus = loop.run_until_complete(Bus.connect(Settings(nats_url=servers.nats_url), "test-forger"))
    loop.run_until_complete(bus.ensure_streams())  # the dead letters' stream among them, as a service declares it
    client = Client(servers.nats_url, timeout=10.0)
    loop.run_until_complete(client.connect())

    async def forge(sequence: str, index: str) -> None:
        headers = {s.DEAD_LETTER_SEQUENCE: sequence, s.DEAD_LETTER_INDEX: index, s.DEAD_LETTER_REASON: index}
        await bus.js.publish(s.event_dead_letter_subject("labels"), b"{}", headers=headers)
        assert await bus.last_dead_event("labels") == (whole(sequence), whole(index))
        newest = (await client.dead_letters("labels"))[-1]
        assert newest.sequence == whole(sequence) and newest.reason == index
        encode(newest)  # as `corral dead-letters -o json` prints it

    @settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(HEADER_TEXT, HEADER_TEXT)
    def forged(sequence: str, index: str) -> None:
        loop.run_until_complete(forge(sequence, index))

    try:
        forged()
    finally:
        loop.run_until_complete(client.close())
        loop.run_until_complete(bus.close())
        loop.close()
