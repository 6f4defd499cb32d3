"""Serve queries: decode the question, answer from the view, reject bad input clearly."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import msgspec
from nats.aio.msg import Msg

from schemas.queries import PageQuery
from services.core.errors import CodecError
from services.runtime.codec import decode, encode
from services.runtime.commands import Responder, not_ready, rejection
from services.runtime.pages import Pager

Q = TypeVar("Q")


def query_handler(
    kind: type[Q],
    answer: Callable[[Q], msgspec.Struct],
    *,
    before: Callable[[], Awaitable[None]] | None = None,
    pager: Pager | None = None,
) -> Responder:
    """A NATS request handler: `kind` in, `answer(query)` out (a `Rejected` for bad input or an unknown id).

    `before` runs first (for example: wait until the view has folded the log up to its current end). With a
    `pager`, a list query (a `PageQuery`) is answered one page at a time, and every answer fits the bus.
    """

    async def serve(msg: Msg) -> bytes:
        try:
            query: Q = decode(msg.data or b"{}", kind)
        except CodecError as error:
            return encode(rejection(error))
        unready = await not_ready(before)
        if unready is not None:
            return encode(unready)
        try:
            if pager is None:
                return encode(answer(query))
            return pager.fit(pager.page(query, answer) if isinstance(query, PageQuery) else answer(query))
        except Exception as error:  # a bad query is refused; a bug met on it fails this one query only
            return encode(rejection(error))

    return serve
