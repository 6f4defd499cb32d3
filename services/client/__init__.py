"""The Corral client: publish scheduling requests to the bus and read decisions back (async, with a sync wrapper)."""

from services.client.client import Client
from services.client.sync import SyncClient
from services.core.errors import (
    ConflictError,
    CorralError,
    NotFoundError,
    RejectedError,
    ServiceFailedError,
    TooLargeError,
    UnavailableError,
)

__all__ = [
    "Client",
    "ConflictError",
    "CorralError",
    "NotFoundError",
    "RejectedError",
    "ServiceFailedError",
    "SyncClient",
    "TooLargeError",
    "UnavailableError",
]
