"""Serve queries: decode the question, answer from the view, reject bad input clearly."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.msg import Msg

from schemas.replies import Rejected
from services.runtime.codec import CodecError, decode, encode


def query_handler(kind: Any, answer: Callable[[Any], object]) -> Callable[[Msg], Awaitable[bytes]]:
    """A NATS request handler: `kind` in, `answer(query)` out (a `Rejected` for bad input)."""

    async def serve(msg: Msg) -> bytes:
        try:
            return encode(answer(decode(msg.data or b"{}", kind)))
        except (CodecError, ValueError) as error:
            return encode(Rejected(str(error)))

    return serve
