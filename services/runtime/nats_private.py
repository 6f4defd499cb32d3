"""The one place that touches nats-py's private attributes: a subscription's queue of received messages, what
a connection holds to write, and how it parses a message's headers.

Why the queue: the bus takes the messages a subscription has already received straight from that queue, because
the library's own iterator and `fetch` start a task and a timer per message. Taking them means keeping nats-py's
books as it does: `task_done()` on the queue and the subscription's pending byte count lowered, or nats-py
would count the subscription ever fuller and drop its messages as a slow consumer.

Why the writes: what nats-py holds unwritten when the connection drops it writes on reconnecting, however much
later. A copy of an event sent that late can pass the stream's duplicate window and be stored a second time, so
the bus drops it once the connection is lost (`drop_unwritten`) and publishes the event again itself, checked
against the log.

Why the headers: nats-py parses the headers of every message it receives (a request's `Nats-Msg-Id` and reply
inbox, an event's id) with a check of each header name that runs a generator over its characters; the same rules
checked with one regular expression cost a third to a half as much per message (`parse_header_lines`).

Checked against nats-py 2.16.0 (`Subscription._pending_queue`, `Subscription._pending_size`,
`Subscription._message_iterator._unsubscribed_future`, `Client._pending`, `Client._pending_data_size`,
`Client._parse_header_lines`);
pyproject.toml pins nats-py below 2.17 and tests/integration/test_nats_private.py fails loudly if an upgrade removes
or changes them.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription


class PendingQueue:
    """The messages a subscription received and has not handed out yet, taken with nats-py's books kept."""

    __slots__ = ("_queue", "_sub")

    def __init__(self, sub: Subscription, queue: asyncio.Queue[Msg]) -> None:
        self._sub, self._queue = sub, queue

    def empty(self) -> bool:
        """Whether no received message waits."""
        return self._queue.empty()

    def get_nowait(self) -> Msg:
        """The next received message (`asyncio.QueueEmpty` when none waits)."""
        msg = self._queue.get_nowait()
        self._taken(msg)
        return msg

    async def get(self, timeout: float) -> Msg:
        """The next received message, waiting up to `timeout` seconds for one (`TimeoutError` if none comes)."""
        queue = self._queue
        msg = queue.get_nowait() if not queue.empty() else await asyncio.wait_for(queue.get(), timeout)
        self._taken(msg)
        return msg

    def _taken(self, msg: Msg) -> None:
        self._queue.task_done()
        self._sub._pending_size -= len(msg.data)


def message_reader(sub: Subscription) -> Callable[[], Awaitable[Msg | None]]:
    """A call that waits for `sub`'s next message, None once the subscription has stopped (unsubscribed, or its
    connection closed for good), as the library's iterator ends.

    The library's iterator starts a task and an `asyncio.wait` per message; this awaits the queue itself, which costs
    a third as much. nats-py tells the iterator it made for `sub` when the subscription stops
    (`_SubscriptionMessageIterator._unsubscribed_future`); a `None` put in the queue then wakes the reader. Without
    those attributes, the library's iterator is used.
    """
    pending = pending_queue(sub)
    stopped = getattr(getattr(sub, "_message_iterator", None), "_unsubscribed_future", None)
    if pending is None or not isinstance(stopped, asyncio.Future):
        return _iterated(sub)
    queue: asyncio.Queue[Msg | None] = pending._queue  # type: ignore[assignment]  # None only as the end
    stopped.add_done_callback(lambda _: queue.put_nowait(None))

    async def read() -> Msg | None:
        msg = await queue.get()
        if msg is None:
            queue.task_done()
            return None
        pending._taken(msg)
        return msg

    return read


def _iterated(sub: Subscription) -> Callable[[], Awaitable[Msg | None]]:
    messages = sub.messages

    async def read() -> Msg | None:
        return await anext(messages, None)

    return read


def pending_queue(sub: Subscription) -> PendingQueue | None:
    """`sub`'s queue of received messages; None on a nats-py without those attributes (the caller then uses the
    library's own, slower, way)."""
    queue = getattr(sub, "_pending_queue", None)
    if not isinstance(queue, asyncio.Queue) or not isinstance(getattr(sub, "_pending_size", None), int):
        return None
    return PendingQueue(sub, queue)


def drop_unwritten(nc: NatsClient) -> int | None:
    """Drop what `nc` holds to write and has not written (call it once the connection is lost); the bytes dropped,
    or None on a nats-py without those attributes."""
    pending = getattr(nc, "_pending", None)
    size = getattr(nc, "_pending_data_size", None)
    if not isinstance(pending, list) or not isinstance(size, int):
        return None
    pending.clear()
    nc._pending_data_size = 0
    return size


_CRLF = b"\r\n"
_WHITESPACE = re.compile(r"\s")
"""What `str.isspace` calls whitespace (the regular expression module's `\\s` is the same class)."""


def parse_header_lines(raw: bytes) -> dict[str, str]:
    """A message's header lines (`Name: Value`, CRLF-separated) as nats-py 2.16's `Client._parse_header_lines` reads
    them: a line without a colon, a name that is not ASCII or holds whitespace is skipped; names and values are
    stripped, values decoded as UTF-8 with the undecodable replaced."""
    out: dict[str, str] = {}
    for line in raw.split(_CRLF):
        name, colon, value = line.partition(b":")
        if not colon:
            continue
        try:
            key = name.strip().decode("ascii")
        except UnicodeDecodeError:
            continue
        if _WHITESPACE.search(key) is None:
            out[key] = value.strip().decode("utf-8", "replace")
    return out


def parse_headers_faster(nc: NatsClient) -> bool:
    """Make `nc` parse headers with `parse_header_lines`; False (nothing changed) on a nats-py without that
    method."""
    if not callable(getattr(type(nc), "_parse_header_lines", None)):
        return False
    nc._parse_header_lines = parse_header_lines  # type: ignore[method-assign]
    return True
