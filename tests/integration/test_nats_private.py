"""The adapter over nats-py's private attributes, against a real nats-server: present on the pinned nats-py, and
taking messages through it keeps nats-py's books (no slow-consumer drops). An upgrade that removes or changes
those attributes fails here, loudly, instead of the bus silently falling back to the library's slower way."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from importlib.metadata import version

import nats
import pytest
from nats.aio.client import Client as NatsClient

from services.local.mesh import Mesh
from services.runtime.connection import sent
from services.runtime.nats_private import (
    PendingQueue,
    drop_unwritten,
    message_reader,
    parse_headers_faster,
    pending_queue,
)

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

PAYLOAD = b"x" * 100
LIMIT = 1000
"""The subscription's pending byte limit: ten payloads; nats-py drops what arrives past it (slow consumer)."""


@pytest.fixture
async def nc(servers: Mesh) -> AsyncIterator[NatsClient]:
    """A plain nats-py connection to the server."""
    connection = await nats.connect(servers.nats_url)
    try:
        yield connection
    finally:
        await connection.close()


async def received(sub_queue: PendingQueue, count: int, timeout: float = 10.0) -> list[bytes]:
    """`count` messages taken through the adapter, waiting for each up to `timeout`."""
    return [(await sub_queue.get(timeout)).data for _ in range(count)]


def test_the_pinned_nats_py_is_the_one_the_adapter_was_checked_against() -> None:
    assert version("nats-py").startswith("2.16."), "check services/runtime/nats_private.py, then move the pin"


async def test_a_subscription_has_the_private_queue_the_adapter_reads(nc: NatsClient) -> None:
    sub = await nc.subscribe("probe.present")
    queue = pending_queue(sub)
    assert queue is not None, "nats-py no longer has Subscription._pending_queue/_pending_size: see nats_private.py"
    await nc.publish("probe.present", PAYLOAD)
    assert await received(queue, 1) == [PAYLOAD]


async def test_a_connection_parsing_headers_faster_receives_them_as_sent(nc: NatsClient) -> None:
    assert parse_headers_faster(nc), "nats-py no longer has Client._parse_header_lines: see nats_private.py"
    sub = await nc.subscribe("probe.headers")
    sent = {"Nats-Msg-Id": "scheduler-a-e1-7", "Corral-Reply-To": "_INBOX.x.1", "Note": "é ok"}
    await nc.publish("probe.headers", PAYLOAD, headers=sent)
    msg = await sub.next_msg(timeout=10)
    assert msg.headers == sent


async def test_taking_messages_keeps_the_pending_counts_true(nc: NatsClient) -> None:
    sub = await nc.subscribe("probe.counts")
    queue = pending_queue(sub)
    assert queue is not None
    for _ in range(3):
        await nc.publish("probe.counts", PAYLOAD)
    await nc.flush()
    async with asyncio.timeout(10):
        while sub.pending_msgs < 3:
            await asyncio.sleep(0.01)
    assert (sub.pending_msgs, sub.pending_bytes) == (3, 3 * len(PAYLOAD))
    assert queue.get_nowait().data == PAYLOAD
    assert (sub.pending_msgs, sub.pending_bytes) == (2, 2 * len(PAYLOAD))
    await received(queue, 2)
    assert (sub.pending_msgs, sub.pending_bytes, queue.empty()) == (0, 0, True)


async def test_far_more_than_the_byte_limit_gets_through_when_taken_through_the_adapter(nc: NatsClient) -> None:
    """Fifty payloads through a subscription that holds ten at most: none dropped, as each batch is taken."""
    sub = await nc.subscribe("probe.limit", pending_bytes_limit=LIMIT)
    queue = pending_queue(sub)
    assert queue is not None
    got: list[bytes] = []
    for _ in range(10):
        for _ in range(5):
            await nc.publish("probe.limit", PAYLOAD)
        await nc.flush()
        got += await received(queue, 5)
    assert got == [PAYLOAD] * 50
    assert sub.pending_bytes == 0


async def test_what_a_connection_holds_unwritten_is_dropped_and_never_delivered(nc: NatsClient) -> None:
    """Publishes held in nats-py's buffer (as while reconnecting) are dropped whole: the byte count comes back, and
    a publish after them is the only one delivered."""
    listener = await nats.connect(nc.connected_url.geturl() if nc.connected_url else "")
    try:
        sub = await listener.subscribe("probe.unwritten")
        await sent(listener)  # the server routes to it from here on
        flush = nc._flush_pending

        async def held(force_flush: bool = False) -> None:
            """nats-py's flush, held back."""

        setattr(nc, "_flush_pending", held)  # noqa: B010
        await nc.publish("probe.unwritten", b"held")
        dropped = drop_unwritten(nc)
        assert dropped is not None and dropped > len(b"held"), "nats-py no longer has Client._pending: see nats_private"
        assert drop_unwritten(nc) == 0
        setattr(nc, "_flush_pending", flush)  # noqa: B010
        await nc.publish("probe.unwritten", b"after")
        await sent(nc)
        assert (await sub.next_msg(timeout=10)).data == b"after"
        with pytest.raises(nats.errors.TimeoutError):
            await sub.next_msg(timeout=0.3)
    finally:
        await listener.close()


async def test_the_message_reader_hands_messages_in_order_then_none_once_unsubscribed(nc: NatsClient) -> None:
    """The log reader's wait (no task per message): every message received, in order, its books kept, then the end
    once the subscription stops, as nats-py's own iterator ends."""
    sub = await nc.subscribe("probe.reader")
    read = message_reader(sub)
    for index in range(3):
        await nc.publish("probe.reader", b"%d" % index)
    async with asyncio.timeout(10):
        got = [await read() for _ in range(3)]
        assert [msg.data for msg in got if msg is not None] == [b"0", b"1", b"2"]
        assert (sub.pending_msgs, sub.pending_bytes) == (0, 0)
        waiting = asyncio.ensure_future(read())
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await sub.unsubscribe()
        assert await waiting is None


async def test_the_message_reader_ends_when_its_connection_closes(servers: Mesh) -> None:
    connection = await nats.connect(servers.nats_url)
    sub = await connection.subscribe("probe.closed")
    read = message_reader(sub)
    waiting = asyncio.ensure_future(read())
    await asyncio.sleep(0.05)
    await connection.close()
    async with asyncio.timeout(10):
        assert await waiting is None
