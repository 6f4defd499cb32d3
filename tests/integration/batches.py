"""A batch of requests sent as any NATS client would send it: published on `corral.req.batch`, answered on an inbox."""

from __future__ import annotations

import uuid

from schemas import subjects as s
from schemas.replies import BatchReply, Rejected
from services.client import Client
from services.runtime.codec import decode


async def sent_raw(
    client: Client, data: bytes, key: str = "", headers: dict[str, str] | None = None, timeout: float = 20.0
) -> BatchReply | Rejected:
    """The answer to `data` published on `corral.req.batch` under `Nats-Msg-Id` `key` (fresh when empty), with
    `headers` besides."""
    inbox = client.bus.nc.new_inbox()
    sub = await client.bus.nc.subscribe(inbox)
    try:
        headers = {**(headers or {}), s.REPLY_HEADER: inbox, "Nats-Msg-Id": key or uuid.uuid4().hex}
        await client.bus.js.publish(s.BATCH, data, headers=headers)
        msg = await sub.next_msg(timeout=timeout)
    finally:
        await sub.unsubscribe()
    answer: BatchReply | Rejected = decode(msg.data, BatchReply | Rejected)
    return answer
