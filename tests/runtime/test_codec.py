"""The codec bounds every message before decoding it and turns any failure into a `CodecError`."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import AnyEvent, NodeRegistered
from schemas.commands import RegisterNode
from schemas.proposals import Proposals
from services.core.errors import CodecError
from services.runtime.codec import MAX_DEPTH, _marks, _nests_deeper_exactly, _nests_too_deep, decode, encode
from tests.support.examples import examples

DEEP = b'{"a":' * 1000 + b"1" + b"}" * 1000
"""A 6 KB object nested 1,000 levels: past the interpreter's recursion limit."""


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (DEEP, "nest deeper than the 48-level limit"),
        (b"[" * 5000, "nest deeper"),
        (b'{"type": "NodeRegistered", "node_id": "\xed\xb3\xbf", "resources": {}}', "not valid UTF-8"),
        (b'{"type": "NodeRegistered", "node_id": "n", "resources": {"\xff": 1}}', "not valid UTF-8"),
        (b"\x00garbage", "not valid JSON"),
        (b'{"type": "NodeRegistered", "node_id": "n", "resources": {"CPU": "x"}}', "$.resources"),
        (b'{"type": "NodeRegistered", "node_id": "n", "resources": {}, "resourcez": 1}', "unknown field `resourcez`"),
        (b'{"type": "NodeRegistered", "node_id": "n", "resources": {"CPU": 1e999}}', "out of range"),
        (b'{"type": "NodeRegistered", "node_id": "n", "resources": {"CPU": -1}}', ">= 0"),
    ],
)
def test_a_malformed_event_is_a_codec_error(data: bytes, says: str) -> None:
    with pytest.raises(CodecError, match=r"one of \d+ message types") as raised:
        decode(data, AnyEvent)
    assert says in str(raised.value)


def test_the_size_limit_is_checked_before_decoding() -> None:
    with pytest.raises(CodecError, match="message of 2000 bytes is over the 1000-byte limit"):
        decode(b" " * 2000, RegisterNode, max_bytes=1000)


def test_depth_up_to_the_limit_is_read_and_brackets_inside_strings_do_not_count() -> None:
    at_limit = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    nested: list[object] = []
    for _ in range(MAX_DEPTH - 1):
        nested = [nested]
    assert decode(at_limit, list) == nested
    with pytest.raises(CodecError, match="nest deeper"):
        decode(b"[" + at_limit + b"]", list)
    quoted = '{"[[[[": "' + "{[" * 500 + '\\"' + '"}'
    assert decode(quoted.encode(), dict) == {"[[[[": "{[" * 500 + '"'}


def test_a_wide_message_with_many_brackets_is_read() -> None:
    labels = {f"k{i}": "{[" for i in range(50)}
    node = NodeRegistered(node_id="n1", resources={"CPU": 1.0}, labels=labels, event_id="e1")
    wide = encode([node] * 200)
    assert decode(wide, list[AnyEvent]) == [node] * 200


def test_a_key_with_invalid_utf8_beside_a_wrong_type_is_a_codec_error() -> None:
    with pytest.raises(CodecError, match="RegisterNode"):
        decode(b'{"\xed\xb3\xbf": 1, "node_id": 5}', RegisterNode)


def test_a_reason_quoting_the_message_stays_one_line() -> None:
    with pytest.raises(CodecError) as refused:
        decode(b'{"node_id": "n1", "x\\ny\\u2028z\\u0085": 1}', RegisterNode)
    assert refused.value.reason == "Object contains unknown field `x\\ny\\u2028z\\x85`"


@pytest.mark.parametrize("prng", [2**64, 2**200])
def test_a_proposal_with_a_generator_state_wider_than_64_bits_is_refused_naming_it(prng: int) -> None:
    """msgspec's own bounds stop at int64: the schema checks the upper one of a 64-bit state itself."""
    batch = b'{"worker":"w","folded":1,"proposals":[{"request":{"kind":"remove_actor","actor_id":"a"},'
    batch += b'"request_sequence":1,"prng":%d}]}' % prng
    with pytest.raises(CodecError, match=r"prng \d+: a generator state is at most 2\*\*64 - 1"):
        decode(batch, Proposals)
    assert decode(batch.replace(b"%d" % prng, b"%d" % (2**64 - 1)), Proposals).proposals[0].prng == 2**64 - 1


_BRACKETY = st.lists(st.sampled_from([b"[", b"]", b"{", b"}", b'"', b"\\", b"a", b","]), max_size=120).map(b"".join)
_NESTED = st.recursive(
    st.text(st.sampled_from('[]{}"\\a'), max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text("[]{}k", max_size=3), inner, max_size=3),
    max_leaves=40,
).map(encode)


@settings(max_examples=examples(600), deadline=None)
@given(st.one_of(_BRACKETY, _NESTED), st.integers(0, 12))
def test_the_quick_depth_check_answers_as_the_exact_one(data: bytes, max_depth: int) -> None:
    """The quick path (no backslash, quotes paired) never changes a verdict: the same bytes are refused in every
    process, whichever path reads them."""
    assert _nests_too_deep(data, _marks(data), max_depth) == _nests_deeper_exactly(data, max_depth)
