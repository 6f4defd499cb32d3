"""Whatever the refusals bucket holds under a request's key, a resend of that request is answered with a refusal it
decodes, or as unavailable, and a duplicate of a kept request other than its own is a conflict: never another error
(the bucket's content is read as untrusted input)."""

from __future__ import annotations

import asyncio
import itertools

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import Placed, ScheduleRequest
from schemas.commands import RemoveActor, SubmitActor
from schemas.replies import Rejected, RequestReply
from services.client import Client
from services.client.errors import RAISED
from services.core.errors import ConflictError, CorralError, UnavailableError
from services.local.mesh import Mesh
from services.runtime import refusals
from services.runtime.codec import decode, encode
from tests.integration.conftest import wait_ready

pytestmark = [pytest.mark.integration]

FIRST_SEQUENCE = 10**12
"""Far above any sequence the test's requests stream reaches: these keys name no stored request."""

values = st.one_of(
    st.binary(max_size=512),
    st.builds(Rejected, st.text(max_size=200), st.sampled_from(sorted(RAISED))).map(encode),
    st.builds(Placed, st.text(max_size=20), st.text(max_size=20)).map(encode),
    st.sampled_from([b"", b"{}", b'{"type":"rejected"}', b'{"type":"rejected","error":1}', b"\xff" * 8]),
)


def test_a_resend_gets_a_kept_refusal_or_unavailable_whatever_the_bucket_holds(mesh: Mesh) -> None:
    """Arbitrary bytes, refusals and other replies under a key; the resend of that key raises the refusal they
    encode, else `UnavailableError` once no decision is found (never a decoding error or a crash)."""
    loop = asyncio.new_event_loop()
    client = Client(mesh.nats_url, timeout=2.0)
    loop.run_until_complete(client.connect())
    loop.run_until_complete(wait_ready(client))
    sequences = itertools.count(FIRST_SEQUENCE)

    async def resend(value: bytes) -> CorralError:
        sequence = next(sequences)
        await client.bus.js.publish(refusals.refusal_subject(sequence), value)
        request = SubmitActor(request=ScheduleRequest(f"fuzz-{sequence}", {"CPU": 1}), command_id=f"fuzz-{sequence}")
        with pytest.raises(CorralError) as raised:
            await client._resent_answer(request, sequence, timeout=0.3)
        return raised.value

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(values)
    def one(value: bytes) -> None:
        error = loop.run_until_complete(resend(value))
        expected = _decoded(value)
        if expected is None:
            assert isinstance(error, UnavailableError) and "no decision for it" in str(error)
        else:
            assert type(error) is RAISED[expected.kind] and str(error) == expected.error

    try:
        one()
    finally:
        loop.run_until_complete(client.close())
        loop.close()


KEY = "fuzz-key"
SENT = SubmitActor(request=ScheduleRequest("a1", {"CPU": 1, "GPU": 2}, labels={"x": "1"}), command_id=KEY)
"""The request a duplicate sends under `KEY`."""

same = st.sampled_from(
    [
        encode(SENT),
        b'{"kind":"schedule","command_id":"fuzz-key","request":{"labels":{"x":"1"},"resources":{"GPU":2.0,"CPU":1},'
        b'"actor_id":"a1","vcluster_id":""}}',  # another order, floats, the root cluster spelt ""
        encode(msgspec.structs.replace(SENT, correlation_id="trace-7")),  # the envelope is no content
    ]
)
"""Encodings of `SENT` as another sender may have stored it."""
other = st.one_of(
    st.binary(max_size=512),
    st.builds(
        ScheduleRequest,
        st.text(min_size=1, max_size=8),
        st.dictionaries(st.sampled_from(["CPU", "GPU", "mem"]), st.integers(0, 8), max_size=3),
    )
    .filter(lambda request: request != SENT.request)
    .map(lambda request: encode(SubmitActor(request=request, command_id=KEY))),
    st.builds(RemoveActor, actor_id=st.text(min_size=1, max_size=8), command_id=st.just(KEY)).map(encode),
    st.sampled_from([b"", b"{}", b'{"kind":"schedule"}', b'{"kind":"schedule","request":{"actor_id":1}}']),
)
"""What a key may have stored that is not `SENT`: other requests, other kinds, bytes that decode to none."""


def test_a_duplicate_is_a_conflict_unless_the_kept_request_is_its_own(mesh: Mesh) -> None:
    """Its own request (in any encoding) or anything else kept as the request a key first stored: a duplicate
    under that key gets the resend's answer (here `UnavailableError`: no decision is known) for its own, and a
    `ConflictError` naming the key for anything else."""
    loop = asyncio.new_event_loop()
    client = Client(mesh.nats_url, timeout=2.0)
    loop.run_until_complete(client.connect())
    loop.run_until_complete(wait_ready(client))
    sequences = itertools.count(FIRST_SEQUENCE)

    async def duplicate(kept: bytes) -> CorralError:
        sequence = next(sequences)
        await client.bus.js.publish(refusals.request_subject(sequence), kept)
        with pytest.raises(CorralError) as raised:
            await client._duplicate_answer(SENT, encode(SENT), sequence, timeout=0.3)
        return raised.value

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.one_of(same.map(lambda kept: (True, kept)), other.map(lambda kept: (False, kept))))
    def one(case: tuple[bool, bytes]) -> None:
        own, kept = case
        error = loop.run_until_complete(duplicate(kept))
        if own:
            assert isinstance(error, UnavailableError) and "no decision for it" in str(error), error
        else:
            assert isinstance(error, ConflictError), error
            assert str(error).startswith(f"command_id {KEY!r}: already used for a different request (")

    try:
        one()
    finally:
        loop.run_until_complete(client.close())
        loop.close()


def _decoded(value: bytes) -> Rejected | None:
    """The refusal `value` encodes, if it is one."""
    try:
        reply = decode(value, RequestReply)
    except CorralError:
        return None
    return reply if isinstance(reply, Rejected) else None
