"""A service's `Rejected` reply as the error the client raises (the classes live in `services.core.errors`)."""

from __future__ import annotations

from schemas.replies import Rejected, RejectionKind
from services.core.errors import (
    ConflictError,
    CorralError,
    NotFoundError,
    RejectedError,
    ServiceFailedError,
    StorageFullError,
)

RAISED: dict[RejectionKind, type[CorralError]] = {
    "invalid": RejectedError,
    "not_found": NotFoundError,
    "conflict": ConflictError,
    "unavailable": ServiceFailedError,
    "storage_full": StorageFullError,
}
"""The error for each kind of rejection: only the first three are the sender's fault."""


def raise_for(rejected: Rejected) -> None:
    """Raise the error that matches a rejection: a `RejectedError` when the request was refused, a
    `ServiceFailedError` when the service failed on it or could not serve it now."""
    raise RAISED[rejected.kind](rejected.error)
