"""The bus's connection: the NATS client with JetStream, the streams and KV buckets declared in code, JetStream
requests asked again while no server answers them, request/reply serving, and closing."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api
from nats.js.kv import KeyValue

from schemas import subjects as s
from services.runtime import replicas, telemetry
from services.runtime.settings import Settings

log = logging.getLogger("corral.bus")

DUPLICATE_WINDOW = 120.0
"""How long (seconds) the event and request streams remember a `Nats-Msg-Id`: a repeat within it is dropped."""

STREAMS = (
    api.StreamConfig(
        name=s.EVENTS_STREAM,
        subjects=[s.EVENTS_SUBJECTS],
        storage=api.StorageType.FILE,
        duplicate_window=DUPLICATE_WINDOW,
        description="The event log of record",
    ),
    api.StreamConfig(
        name=s.REQUESTS_STREAM,
        subjects=[s.REQUESTS_SUBJECTS],
        storage=api.StorageType.FILE,
        retention=api.RetentionPolicy.WORK_QUEUE,
        duplicate_window=DUPLICATE_WINDOW,
        description="Scheduling requests waiting for the scheduler",
    ),
    api.StreamConfig(
        name=s.DEAD_LETTERS_STREAM,
        subjects=[s.DEAD_LETTERS_SUBJECTS],
        storage=api.StorageType.FILE,
        max_age=7 * 24 * 3600.0,
        description="Messages a service could not decode or apply",
    ),
)


LOG_STREAMS = (s.EVENTS_STREAM, s.DEAD_LETTERS_STREAM)
"""The streams every service uses: the event log and the dead letters (the scheduler also has the requests')."""


class BusUnreachable(ConnectionError):  # noqa: N818 - a state, like ConnectionRefusedError
    """No NATS server answered within the time a caller allowed for the first connection."""


CONSUMER_LIMIT = 10026
"""JetStream's error code for "maximum consumers limit reached": asked again with a back-off, never fatal."""
LONGEST_CONSUMER_WAIT_S = 5.0
"""The longest wait between two tries to make a consumer while the stream or account has no room for it."""

_UNANSWERED = (
    TimeoutError,
    nats.errors.TimeoutError,
    nats.errors.NoRespondersError,
    nats.js.errors.NoStreamResponseError,
    nats.js.errors.ServiceUnavailableError,
)
"""What a JetStream request meets while no server answers for its stream: asked again by `with_retries`."""

T = TypeVar("T")


class BusConnection:
    """A connected NATS client with JetStream; the part of the bus every other part builds on."""

    def __init__(self, nc: NatsClient, settings: Settings) -> None:
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream(timeout=5.0, publish_async_max_pending=8192)
        self.settings = settings
        self.closing = False
        self.connection_listeners: list[Callable[[bool], None]] = []
        """Called with False when the connection to NATS is lost and with True when it is back."""

    async def ensure_streams(self, names: Sequence[str] = LOG_STREAMS) -> None:
        """Create the streams named (of `STREAMS`) if missing, on `settings.replicas` servers; idempotent.

        An existing stream keeps its configuration except its replicas, moved to `settings.replicas`
        (`SettingsError` when NATS cannot). A service declares only the streams it uses: deploy/nats.conf lets it
        inspect and create no others.

        Asked again while JetStream does not answer (`with_retries`): a service starting just after nats-server
        restarted, or while a cluster elects a stream's leader, waits instead of exiting.
        """
        for name in names:
            await self.with_retries(functools.partial(self.ensure_stream, name), f"stream {name}")

    async def ensure_stream(self, name: str) -> None:
        """Create the stream `name` (of `STREAMS`) if missing, else move it to `settings.replicas`; asked once."""
        (config,) = [config for config in STREAMS if config.name == name]
        try:
            await replicas.replicate(self.js, name, self.settings.replicas)
        except nats.js.errors.NotFoundError:
            await replicas.add_stream(self.js, config, self.settings.replicas)

    async def lease_bucket(self, bucket: str = s.LEASE_BUCKET) -> KeyValue:
        """The KV bucket holding leases (the scheduler's, unless another is named; created if missing), on
        `settings.replicas` servers; asked again while JetStream does not answer."""

        def declare() -> Awaitable[KeyValue]:
            return replicas.key_value(self.js, bucket, self.settings.replicas, ttl=self.settings.lease_ttl, history=1)

        return await self.with_retries(declare, f"KV bucket {bucket}")

    async def with_retries(self, ask: Callable[[], Awaitable[T]], what: str) -> T:
        """`ask()`, asked again while JetStream does not answer it (a stream of a cluster between two leaders, say:
        its requests go unanswered until the others elect one), or refuses a consumer at its limit (backing off up
        to `LONGEST_CONSUMER_WAIT_S`); the outage is logged once, and its end."""
        warned = False
        full = 0
        while True:
            try:
                answer = await ask()
            except _UNANSWERED as error:
                if self.nc.is_closed:
                    raise
                if not warned:
                    log.warning("%s: no answer (%s); asking again", what, str(error) or type(error).__name__)
                    warned = True
                await asyncio.sleep(0.25)
                continue
            except nats.js.errors.APIError as error:
                if error.err_code != CONSUMER_LIMIT or self.nc.is_closed:
                    raise
                if not warned:
                    log.warning("%s: %s; asking again, less often each time", what, error.description)
                    warned = True
                await asyncio.sleep(min(LONGEST_CONSUMER_WAIT_S, 0.25 * 2**full))
                full += 1
                continue
            if warned:
                log.info("%s: answered", what)
            return answer

    # request / reply

    async def serve(self, subject: str, handler: Callable[[Msg], Awaitable[bytes]], queue: str = "") -> Any:
        """Answer requests on `subject` (a queue group per service) with `handler`'s bytes."""

        async def respond(msg: Msg) -> None:
            with telemetry.span_from(msg.headers, subject):
                reply = await handler(msg)
            if answerable(msg.reply):
                await msg.respond(reply)
            elif msg.reply:
                log.warning("request on %s names %r as its reply subject: not answered", subject, msg.reply[:200])

        return await self.nc.subscribe(subject, queue=queue, cb=respond)

    async def close(self) -> None:
        """Flush (for at most a second) and close, without a drain: a drain waits on every JetStream subscription
        still open."""
        if self.nc.is_closed:
            return
        self.closing = True
        with contextlib.suppress(TimeoutError, nats.errors.Error, OSError):
            await asyncio.wait_for(sent(self.nc), timeout=1.0)
        with contextlib.suppress(nats.errors.Error, OSError):  # the connection may be down (a reset socket)
            await self.nc.close()


async def sent(nc: NatsClient, timeout: int = 10) -> None:
    """Wait until the server has taken everything `nc` sent so far (its subscriptions, its publishes). nats-py's
    `flush` writes its PING straight to the socket, ahead of what it still holds to write, so its PONG proves nothing
    about those; by the time it comes back the held writes are on the socket, so a second PING follows them."""
    await nc.flush(timeout=timeout)
    await nc.flush(timeout=timeout)


def answerable(reply: str) -> bool:
    """Whether a message's reply subject may be answered: an inbox, never a Corral or JetStream subject (a hostile
    sender could otherwise have a service publish into the event log or call the JetStream API)."""
    return bool(reply) and not reply.startswith((f"{s.PREFIX}.", "$"))
