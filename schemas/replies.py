"""Replies to commands and durable requests: accepted (with the last event's sequence) or rejected (why)."""

from __future__ import annotations

from typing import Literal

import msgspec

from schemas.decisions import Pending, Placed

RejectionKind = Literal["invalid", "not_found", "conflict", "unavailable", "storage_full"]


class Accepted(msgspec.Struct, frozen=True, tag_field="type", tag="accepted", forbid_unknown_fields=True):
    """The command was applied; `sequence` is the stream sequence of its last event (0: nothing had to change)."""

    sequence: int = 0
    message: str = ""


class Rejected(msgspec.Struct, frozen=True, tag_field="type", tag="rejected", forbid_unknown_fields=True):
    """The command changed nothing: `error` names the field, the value and the rule."""

    error: str
    kind: RejectionKind = "invalid"


CommandReply = Accepted | Rejected
"""What a `corral.cmd.>` command answers."""

RequestReply = Placed | Pending | Accepted | Rejected
"""What the scheduler sends to a durable request's reply inbox: the decision, or accepted / rejected."""


class BatchReply(msgspec.Struct, frozen=True, tag_field="type", tag="batch", forbid_unknown_fields=True):
    """The answers to a `RequestBatch`, one per request and in its order (a Pending's node lists may be shortened
    so the whole fits the bus's payload limit)."""

    replies: list[RequestReply]


DurableReply = RequestReply | BatchReply
"""What a durable request's inbox receives: a `RequestReply`, or a `BatchReply` for a batch (a `Rejected` when the
batch itself is unreadable)."""
