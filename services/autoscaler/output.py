"""What a provider command printed, kept bounded (its first and last `KEPT_BYTES`, however much it printed) and
told escaped (one printable line: nothing raw reaches the log, the `NodeLaunchFailed` event or `autoscaler status`)."""

from __future__ import annotations

import asyncio

KEPT_BYTES = 1024
"""Bytes kept of the start of a command's output, and as many of its end."""


class Output(asyncio.Protocol):
    """Reads a command's output pipe as it comes: keeps the head and the tail, counts the rest."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.size = 0
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        """Keep the head, then a sliding tail."""
        self.size += len(data)
        room = KEPT_BYTES - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data[-KEPT_BYTES:]
        del self.tail[:-KEPT_BYTES]

    def connection_lost(self, exc: Exception | None) -> None:
        """Every writer closed the pipe (or it was closed here)."""
        if not self.closed.done():
            self.closed.set_result(None)

    def note(self) -> str:
        """The output as one escaped line (blanks at both ends dropped), what was not kept said in the middle."""
        elided = self.size - len(self.head) - len(self.tail)
        if not elided:
            return escaped(bytes(self.head + self.tail).strip())
        return (
            f"{escaped(bytes(self.head).lstrip())} ... {elided} bytes elided ... {escaped(bytes(self.tail).rstrip())}"
        )


def escaped(data: bytes) -> str:
    """`data` as printable text: UTF-8 read as such, every byte that is not UTF-8 and every non-printable ASCII
    character (line breaks, controls) as `\\xNN`, other non-printable characters (bidirectional overrides...) as
    `\\uNNNN`, and `\\` as `\\\\`: a note reads back to the bytes unambiguously."""
    return "".join(
        char if char.isprintable() and char != "\\" else _escape(char)
        for char in data.decode("utf-8", errors="surrogateescape")
    )


def _escape(char: str) -> str:
    code = ord(char)
    if char == "\\":
        return "\\\\"
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x80:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
