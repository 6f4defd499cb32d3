"""Run a service: settings, logging and telemetry set up, anyio on asyncio, SIGINT/SIGTERM for a graceful stop."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Awaitable, Callable

import anyio
from anyio import CancelScope

from services.runtime import collector, telemetry
from services.runtime.settings import Settings, SettingsError

log = logging.getLogger("corral.runner")

EXIT_LEASE_LOST = 3
"""Exit code of a scheduler that lost its lease: a fresh start rebuilds its view from the log."""

EXIT_LOG_REPLACED = 4
"""Exit code of a service whose event log is gone or was made again (stream deleted, JetStream store lost): a
fresh start declares the streams again and rebuilds its view from the new log."""


class ServiceExit(Exception):  # noqa: N818 - it is an exit, not an error
    """Stop the service with an exit code (raised by a service that must restart from the log)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code


def setup_logging(level: str) -> None:
    """One log line per record: time, logger, level, message."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )


async def _stop_on_signals(scope: CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for received in signals:
            log.info("%s received: draining and stopping", signal.Signals(received).name)
            scope.cancel()
            return


def run_service(name: str, main: Callable[[Settings], Awaitable[None]]) -> int:
    """Run `main(settings)` until it returns, fails, or a signal stops it; returns the process exit code."""
    try:
        settings = Settings.from_env()
        setup_logging(settings.log_level)
        telemetry.configure(settings, name)
    except SettingsError as error:
        print(f"corral {name}: {error}", file=sys.stderr)
        return 2

    async def supervised() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(_stop_on_signals, group.cancel_scope)
            await main(settings)
            group.cancel_scope.cancel()

    try:
        with collector.collecting_less():
            anyio.run(supervised, backend="asyncio")
    except BaseException as error:
        stop = _service_exit(error)
        if stop is None:
            raise
        log.warning("%s stopping: %s", name, stop)
        return stop.code
    log.info("%s stopped", name)
    return 0


def _service_exit(error: BaseException) -> ServiceExit | None:
    if isinstance(error, ServiceExit):
        return error
    if isinstance(error, SettingsError):  # found once connected: the servers cannot do what a setting asks
        return ServiceExit(2, f"{error}")
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _service_exit(inner)
            if found is not None:
                return found
    return None
