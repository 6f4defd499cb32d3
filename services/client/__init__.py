"""The Corral client: publish scheduling requests to the bus and read decisions back (async, with a sync wrapper)."""

from services.client.client import Client
from services.client.errors import (
    ConflictError,
    CorralError,
    NotFoundError,
    RejectedError,
    TooLargeError,
    UnavailableError,
)
from services.client.sync import SyncClient

__all__ = [
    "Client",
    "ConflictError",
    "CorralError",
    "NotFoundError",
    "RejectedError",
    "SyncClient",
    "TooLargeError",
    "UnavailableError",
]
