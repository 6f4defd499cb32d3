"""Event-stream clients of the gateway on plain sockets (many at once, reading or not), and events written straight
into the log to give them something to read."""

from __future__ import annotations

import asyncio
import re
import socket
from dataclasses import dataclass, field

import nats

from schemas import AnyEvent, NodeLabelsChanged, NodeRegistered
from schemas import subjects as s
from schemas.subjects import subject_of
from services.runtime.codec import encode

ID_LINE = re.compile(rb"(?:^|\n)id: (\d+)\r\n")


@dataclass
class Watcher:
    """One `GET /api/v1/events` over HTTP/1.0 (no chunked framing: the body is the stream as sent)."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    status: int
    headers: dict[str, str]
    body: bytearray = field(default_factory=bytearray)

    def ids(self) -> list[int]:
        """The `id` of every event received so far, in order."""
        return [int(found) for found in ID_LINE.findall(bytes(self.body))]

    async def read_until(self, last: int, timeout: float = 60.0) -> list[int]:
        """Read until the event with id `last` (or the end of the stream) arrived; every id received."""

        async def reading() -> None:
            while True:
                data = await self.reader.read(1 << 20)
                if not data:
                    return
                self.body += data
                tail = self.body[-4096:] if len(self.body) > 4096 else self.body
                if any(int(found) >= last for found in ID_LINE.findall(bytes(tail))):
                    return

        await asyncio.wait_for(reading(), timeout)
        return self.ids()

    async def read_to_end(self, timeout: float = 60.0) -> bytes:
        """Everything until the gateway closes the stream."""
        self.body += await asyncio.wait_for(self.reader.read(), timeout)
        return bytes(self.body)

    def close(self) -> None:
        self.writer.close()


async def open_watcher(
    port: int, query: str = "", *, headers: dict[str, str] | None = None, receive_buffer: int = 0
) -> Watcher:
    """An event stream opened and its answer's head read; `receive_buffer`: a small socket buffer (bytes), so that
    a client that stops reading stalls the gateway's writes soon."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 16)
    lines = [f"GET /api/v1/events{query} HTTP/1.0", f"Host: 127.0.0.1:{port}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    answer_headers = {
        name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in header_lines if line)
    }
    return Watcher(reader, writer, int(status_line.split()[1]), answer_headers)


async def last_sequence(nats_url: str) -> int:
    """The sequence of the log's newest event."""
    nc = await nats.connect(nats_url)
    try:
        return int((await nc.jetstream().stream_info(s.EVENTS_STREAM)).state.last_seq)
    finally:
        await nc.close()


def relabels(node_id: str, count: int, first: int = 0) -> list[AnyEvent]:
    """`count` label changes of one node: cheap for every view to fold."""
    return [
        NodeLabelsChanged(node_id=node_id, labels={"round": str(n)}, event_id=f"relabel-{node_id}-{n}")
        for n in range(first, first + count)
    ]


def registered(node_id: str) -> NodeRegistered:
    """A node registered straight into the log."""
    return NodeRegistered(node_id=node_id, resources={"CPU": 1.0}, labels={}, event_id=f"registered-{node_id}")


async def write_events(nats_url: str, events: list[AnyEvent], at_once: int = 1000) -> None:
    """Append the events straight to the log, `at_once` in flight at a time, in order of their acks."""
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        for first in range(0, len(events), at_once):
            batch = events[first : first + at_once]
            await asyncio.gather(
                *(
                    js.publish(subject_of(event), encode(event), headers={"Nats-Msg-Id": event.event_id})
                    for event in batch
                )
            )
    finally:
        await nc.close()
