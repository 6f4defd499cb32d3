"""A blocking wrapper of the async client for scripts: the same methods, run on a loop in a thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

from services.client.client import Client


class SyncClient:
    """`with SyncClient(url) as client: client.submit(...)`: every `Client` method, blocking."""

    def __init__(self, url: str | None = None, *, timeout: float = 5.0) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="corral-client", daemon=True)
        self._thread.start()
        self._client = Client(url, timeout=timeout)

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def __enter__(self) -> SyncClient:
        self._run(self._client.connect())
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection and stop the loop thread."""
        self._run(self._client.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._client, name)

        def blocking(*args: Any, **kwargs: Any) -> Any:
            return self._run(method(*args, **kwargs))

        blocking.__doc__ = method.__doc__
        return blocking
