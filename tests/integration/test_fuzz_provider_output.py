"""Fuzz what a provider command prints: any bytes, in any chunks, give a note that is one printable line, bounded
(head and tail kept, the rest counted), and that reads back to the output when nothing was elided; through a real
`sh` process too, as the `command` provider runs its command lines."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.autoscaler.output import KEPT_BYTES, Output, escaped
from services.autoscaler.providers import CommandProvider
from services.core.autoscale import ProviderConfig

pytestmark = pytest.mark.fuzz

EXAMPLES = int(os.environ.get("CORRAL_FUZZ_EXAMPLES", "100"))
HOSTILE = st.sampled_from([b"\x00", b"\x1b[2J", b"\r", b"\n", b"\xe2\x80\xae", b"\xff", b"\\x41", b"\xc3", b"\t"])
OUTPUTS = st.lists(st.binary(max_size=600) | HOSTILE, max_size=12).map(b"".join) | st.integers(2_100, 50_000).map(
    lambda size: (b"\x00\xff\x1b\n" * size)[:size]
)


ESCAPE = re.compile(r"\\(\\|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")


def unescaped(note: str) -> bytes:
    """The bytes a note without elision tells (the inverse of `escaped`)."""
    found, at = bytearray(), 0
    for match in ESCAPE.finditer(note):
        found += note[at : match.start()].encode()
        code = match.group(1)
        found += (
            b"\\" if code == "\\" else bytes([int(code[1:], 16)]) if code[0] == "x" else chr(int(code[1:], 16)).encode()
        )
        at = match.end()
    return bytes(found + note[at:].encode())


def check(note: str, data: bytes) -> None:
    """One printable line, bounded, telling `data` (whole, or its ends and how much was left out)."""
    assert note.isprintable()
    assert len(note) <= 2 * 4 * KEPT_BYTES + 40
    elided = re.findall(r" \.\.\. (\d+) bytes elided \.\.\. ", note)
    if len(data) <= 2 * KEPT_BYTES:
        assert not elided and unescaped(note) == data.strip()
    else:
        assert elided == [str(len(data) - 2 * KEPT_BYTES)]


@settings(max_examples=EXAMPLES * 3, deadline=None)
@given(OUTPUTS, st.lists(st.integers(1, 5_000), max_size=8))
def test_any_output_in_any_chunks_gives_a_printable_bounded_note(data: bytes, cuts: list[int]) -> None:
    async def note() -> str:
        output = Output()
        rest = data
        for cut in cuts:
            output.data_received(rest[:cut])
            rest = rest[cut:]
        output.data_received(rest)
        return output.note()

    check(asyncio.run(note()), data)


@pytest.mark.integration
@settings(
    max_examples=max(5, EXAMPLES // 5), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(OUTPUTS)
def test_what_a_real_command_prints_reaches_the_failure_reason_escaped(tmp_path: Path, data: bytes) -> None:
    printed = tmp_path / "printed"
    printed.write_bytes(data)
    provider = CommandProvider(ProviderConfig("command", "x", "y"), "nats://127.0.0.1:1", lambda *_: None, 30.0)
    why = asyncio.run(provider._run(f"cat {printed}; exit 7", dict(os.environ)))
    head, _, note = why.partition(": ")
    assert head == "exited with code 7"
    check(note, data)


def test_a_backslash_is_doubled_so_a_note_reads_back_unambiguously() -> None:
    assert escaped(b"\\x41 \x41") == "\\\\x41 A"
