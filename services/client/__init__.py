"""The Corral client: publish scheduling requests to the bus and read decisions back (async, with a sync wrapper)."""

from services.client.client import Client
from services.client.sync import SyncClient
from services.core.errors import (
    ConflictError,
    CorralError,
    NotFoundError,
    RejectedError,
    ServiceFailedError,
    StorageFullError,
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
    "StorageFullError",
    "SyncClient",
    "TooLargeError",
    "UnavailableError",
]
