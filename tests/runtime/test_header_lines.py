"""The bus's header parser reads every header block as nats-py 2.16's own does (it replaces it on Corral's
connections: `nats_private.parse_headers_faster`)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from nats.aio.client import Client

from services.runtime.nats_private import parse_header_lines
from tests.support.examples import examples

_NAME_CHARS = st.sampled_from(["N", "a", "-", "_", " ", "\t", "\x1c", "\x0b", "é", ":", "\r", "\n", "1"])
names = st.text(_NAME_CHARS, max_size=12)
values = st.text(st.sampled_from(["v", " ", "\t", "é", "\ufffd", ":", "\x00", "_", "\r"]), max_size=12)
lines = st.one_of(
    st.tuples(names, values).map(lambda pair: f"{pair[0]}:{pair[1]}".encode()),
    st.tuples(names, values).map(lambda pair: f"{pair[0]}: {pair[1]}".encode()),
    st.binary(max_size=20),
    st.just(b""),
)
blocks = st.lists(lines, max_size=6).map(b"\r\n".join)


@settings(max_examples=examples(400), deadline=None)
@given(st.one_of(blocks, st.binary(max_size=80)))
def test_every_header_block_is_read_as_nats_py_reads_it(raw: bytes) -> None:
    assert parse_header_lines(raw) == Client._parse_header_lines(raw)


def test_the_headers_corral_sends_are_read_back() -> None:
    raw = b"Nats-Msg-Id: u1a2b3c4-17\r\nCorral-Reply-To: _INBOX.AbC.17\r\nBad Name: x\r\nno colon\r\n\r\n"
    assert parse_header_lines(raw) == {"Nats-Msg-Id": "u1a2b3c4-17", "Corral-Reply-To": "_INBOX.AbC.17"}
