"""The bus: a NATS connection with JetStream (connection.py: the streams declared in code, request/reply), its event
appends (appends.py) and its reading of the log (log_reader.py), made by `Bus.connect`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import nats

from services.runtime.appends import Appends
from services.runtime.connection import BusUnreachable
from services.runtime.log_reader import LogReader
from services.runtime.nats_private import drop_unwritten, parse_headers_faster
from services.runtime.settings import Settings

log = logging.getLogger("corral.bus")


class Bus(Appends, LogReader):
    """A connected NATS client with JetStream; reconnects forever and logs connection changes."""

    @classmethod
    async def connect(
        cls,
        settings: Settings,
        name: str,
        on_reconnect: Callable[[], Awaitable[None]] | None = None,
        *,
        timeout: float | None = None,
    ) -> Bus:
        """Connect to `settings.nats_url` (retrying while the server starts); `on_reconnect` runs after a reconnect.

        Without `timeout` the first connection is retried until it succeeds (a service waits for its bus); with
        one, `BusUnreachable` says after `timeout` seconds that no server answered. A failed first connection is
        logged once, not per retry, and so is a lost one: the first error while reconnecting, until reconnected.
        """

        made: list[Bus] = []
        failures: list[Exception] = []
        disconnected: list[Exception] = []  # while reconnecting, an error was logged: the next attempts' are not

        async def on_error(error: Exception) -> None:
            if made:
                if not disconnected:
                    log.warning("%s: NATS error: %s", name, error)
                if made[0].nc.is_reconnecting:
                    disconnected[:] = [error]
                return
            if not failures:
                log.warning("%s: cannot reach NATS at %s (%s); retrying", name, settings.nats_url, error)
            failures[:] = [error]

        def tell(connected: bool) -> None:
            for listener in made[0].connection_listeners if made else ():
                listener(connected)

        async def on_disconnected() -> None:
            if not (made and made[0].closing):
                dropped = drop_unwritten(made[0].nc) if made else 0
                log.warning("%s: disconnected from NATS (%s bytes unwritten dropped); reconnecting", name, dropped)
                tell(False)

        async def on_reconnected() -> None:
            disconnected.clear()
            log.info("%s: reconnected to NATS", name)
            if made:
                made[0].acks_lost()
            tell(True)
            if on_reconnect is not None:
                await on_reconnect()

        options: dict[str, Any] = {
            "name": name,
            "connect_timeout": 2 if timeout is None else max(0.1, min(2.0, timeout)),
            "allow_reconnect": True,
            "max_reconnect_attempts": -1,
            "reconnect_time_wait": 0.25,
            "error_cb": on_error,
            "disconnected_cb": on_disconnected,
            "reconnected_cb": on_reconnected,
            "pending_size": 64 * 1024 * 1024,
        }
        try:
            async with asyncio.timeout(timeout):
                nc = await nats.connect(settings.nats_servers, **options)
                parse_headers_faster(nc)
                made.append(cls(nc, settings))
        except TimeoutError:
            why = f": {failures[-1]}" if failures else ""
            raise BusUnreachable(f"no NATS server answered at {settings.nats_url} within {timeout:g}s{why}") from None
        if failures:
            log.info("%s: connected to NATS at %s", name, settings.nats_url)
        return made[0]
