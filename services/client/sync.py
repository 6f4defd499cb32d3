"""A blocking wrapper of the async client for scripts: the same methods, run on a loop in a thread."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from schemas import VirtualCluster
from services.client.client import Client
from services.client.job import Job

Runner = Callable[[Coroutine[Any, Any, Any]], Any]


def _blocking(target: object, name: str, run: Runner) -> Any:
    """`target.name`: a coroutine method made blocking through `run`, anything else as it is."""
    attribute = getattr(target, name)
    if not inspect.iscoroutinefunction(attribute):
        return attribute

    def blocking(*args: Any, **kwargs: Any) -> Any:
        return run(attribute(*args, **kwargs))

    blocking.__doc__ = attribute.__doc__
    return blocking


class SyncJob:
    """A `Job` whose methods block: `with client.job(virtual_cluster=...) as job: job.submit(...)`."""

    def __init__(self, job: Job, run: Runner) -> None:
        self._job, self._run = job, run

    def __getattr__(self, name: str) -> Any:
        return _blocking(self._job, name, self._run)


class SyncClient:
    """`with SyncClient(url) as client: client.submit(...)`: every `Client` method, blocking."""

    def __init__(self, url: str | None = None, *, timeout: float = 5.0) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="corral-client", daemon=True)
        self._thread.start()
        self._client = Client(url, timeout=timeout)

    def _run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
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

    @contextmanager
    def job(
        self,
        virtual_cluster: VirtualCluster | None = None,
        vc_id: str | None = None,
        parent: str | None = None,
        priority: int = 0,
        timeout: float = 5.0,
    ) -> Iterator[SyncJob]:
        """`with client.job(virtual_cluster=VirtualCluster(...)) as job:`: `Client.job`, blocking."""
        job = self._client.job(virtual_cluster, vc_id, parent, priority, timeout)
        self._run(job.__aenter__())
        try:
            yield SyncJob(job, self._run)
        except BaseException as error:
            self._run(job.__aexit__(type(error), error, error.__traceback__))
            raise
        self._run(job.__aexit__(None, None, None))

    def __getattr__(self, name: str) -> Any:
        return _blocking(self._client, name, self._run)
