"""What a decision worker proposes to the leading scheduler's applier, and what the applier answers."""

from __future__ import annotations

from typing import Annotated

import msgspec

from schemas.commands import MAX_BATCH, SchedulerRequest
from schemas.replies import RequestReply

PRNG_MAX = (1 << 64) - 1


class Proposal(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One durable request, decided by a worker against its own view (or left to the applier)."""

    request: SchedulerRequest
    request_sequence: int
    """The request's sequence in `CORRAL_REQUESTS`: a request delivered again is answered as it was the first time."""
    inbox: str = ""
    """The client's reply inbox (the applier answers there itself a reply too long to pass back; never for a
    request of a batch, whose one answer the worker sends)."""
    node_id: str = ""
    """The node the worker chose for a new actor; "" leaves the request to the applier, which decides it itself."""
    prng: Annotated[int, msgspec.Meta(ge=-1)] = -1
    """The worker's generator state before its choice (recorded on the placement, as the scheduler records its own)."""
    place: Annotated[int, msgspec.Meta(ge=0, le=MAX_BATCH)] = 0
    """0: the request is its message alone; from 1: its place in its message's `RequestBatch`. A request of a batch
    is answered in its verdict, never sent to the client by the applier, and once one of a batch is refused, its
    later ones in the same proposals are refused too (they are decided in their order)."""

    def __post_init__(self) -> None:
        """A generator state is 64 bits (msgspec's own bounds stop at int64, so the upper one is checked here)."""
        if self.prng > PRNG_MAX:
            raise ValueError(f"prng {self.prng}: a generator state is at most 2**64 - 1")


class Proposals(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A worker's batch: its proposals, decided on a view that had folded the event log up to `folded`."""

    worker: str
    folded: Annotated[int, msgspec.Meta(ge=0)]
    proposals: list[Proposal]


class Verdict(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The applier's answer to one proposal, given once its events are stored."""

    reply: RequestReply | None = None
    """What the client is told (a request of a batch: its Pending's node lists may be shortened, so the answer fits
    the payload limit); None when the proposal was refused (or `sent`)."""
    sent: bool = False
    """The applier sent the reply to the client's inbox itself (too long to pass back): ack the request."""
    poison: bool = False
    """The scheduler failed on the request (set aside in dead letters): terminate it, never deliver it again."""


class Verdicts(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One verdict per proposal, in order; `sequence`: fold the log up to it before proposing the refused again."""

    sequence: int
    verdicts: list[Verdict]
