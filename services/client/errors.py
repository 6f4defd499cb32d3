"""What the client raises: a rejected command (bad input is a `ValueError`), a missing thing, no service."""

from __future__ import annotations

from schemas.replies import Rejected


class CorralError(Exception):
    """Anything the Corral client reports as failed."""


class RejectedError(CorralError, ValueError):
    """A service refused the command and changed nothing; the message names the field, value and rule."""

    def __init__(self, rejected: Rejected) -> None:
        super().__init__(rejected.error)
        self.kind = rejected.kind


class NotFoundError(RejectedError, LookupError):
    """The command or query names an actor, node or group that does not exist."""


class ConflictError(RejectedError):
    """The command contradicts what is live (an id resubmitted with another request); the message names both."""


class TooLargeError(RejectedError):
    """A request over the bus's payload limit: it was not sent; the message names its size and the limit."""


class UnavailableError(CorralError):
    """No service answered in time (is `corral up` running, and is CORRAL_NATS_URL right?)."""


def raise_for(rejected: Rejected) -> None:
    """Raise the error that matches a rejection."""
    if rejected.kind == "not_found":
        raise NotFoundError(rejected)
    if rejected.kind == "conflict":
        raise ConflictError(rejected)
    raise RejectedError(rejected)
