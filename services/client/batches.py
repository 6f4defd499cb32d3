"""How `Client.send_batch` cuts a list of requests into batch messages: at most `MAX_BATCH` requests each, and each
under the size the services read (`CORRAL_MAX_MESSAGE_BYTES`) and the server carries."""

from __future__ import annotations

from collections.abc import Sequence

from schemas.commands import MAX_BATCH, SchedulerRequest
from services.runtime.codec import encode

BATCH_HEADROOM = 1024
"""Bytes a batch message leaves free under the limit: its headers, and the envelope around its requests."""


def batch_parts(requests: Sequence[SchedulerRequest], limit: int) -> list[list[SchedulerRequest]]:
    """`requests` in consecutive parts of at most `MAX_BATCH`, each part's requests adding up to at most `limit` bytes
    encoded (a request alone over it is a part of its own, refused as too large when sent)."""
    parts: list[list[SchedulerRequest]] = []
    part: list[SchedulerRequest] = []
    size = 0
    for request in requests:
        length = len(encode(request)) + 1  # and its comma
        if part and (len(part) >= MAX_BATCH or size + length > limit):
            parts.append(part)
            part, size = [], 0
        part.append(request)
        size += length
    if part:
        parts.append(part)
    return parts
