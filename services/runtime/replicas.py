"""Streams and KV buckets on `CORRAL_REPLICAS` servers of a NATS cluster: declared so, and moved when not."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext, api
from nats.js.kv import KeyValue

from services.runtime.settings import SettingsError

log = logging.getLogger("corral.replicas")

LEADER_SECONDS = 30.0
"""How long a stream may take to elect its leader (a stream just made on a cluster does, and after a server died)."""
UPDATE_SECONDS = 3.0
"""How long a stream's move to other replicas may take to be answered (a user without the right gets no answer)."""

PEERS_SECONDS = 30.0
"""How long a cluster may take to have enough JetStream servers for the replicas asked for: servers started together
join one by one, so a service started with them may ask before the last has joined."""

NOT_CLUSTERED = 10074
REFUSALS = {NOT_CLUSTERED: "a single server keeps 1", 10023: "too few servers", 10005: "too few servers"}
"""JetStream's error codes for replicas it cannot place: not clustered, insufficient resources, no suitable peers."""


async def add_stream(js: JetStreamContext, config: api.StreamConfig, replicas: int) -> None:
    """Create the stream of `config` on `replicas` servers (nothing when another process made it meanwhile), and
    wait until it has a leader."""
    with contextlib.suppress(nats.js.errors.BadRequestError):  # already in use: made by another process
        await _placed(
            config.name or "", replicas, lambda: js.add_stream(dataclasses.replace(config, num_replicas=replicas))
        )
    await led_info(js, config.name or "", made=True)


async def replicate(js: JetStreamContext, stream: str, replicas: int) -> None:
    """Move an existing `stream` to `replicas` servers when it is kept on another number (`NotFoundError` when it
    is missing); `SettingsError` when NATS cannot, or this user may not change the stream (deploy/nats.conf grants
    no one `$JS.API.STREAM.UPDATE`: an operator moves it)."""
    config = (await led_info(js, stream)).config
    have = config.num_replicas or 1
    if have == replicas:
        return
    log.warning("stream %s is kept on %d servers, CORRAL_REPLICAS says %d: moving it", stream, have, replicas)
    try:
        moved = dataclasses.replace(config, num_replicas=replicas)
        await _placed(stream, replicas, lambda: asyncio.wait_for(js.update_stream(moved), UPDATE_SECONDS))
    except (TimeoutError, nats.errors.Error) as error:
        raise SettingsError(
            f"CORRAL_REPLICAS {replicas!r}: stream {stream} is kept on {have} servers and could not be moved to "
            f"{replicas} ({error!r}); move it as an operator (`nats stream edit {stream} --replicas {replicas}`) "
            f"or set CORRAL_REPLICAS={have}"
        ) from None


async def led_info(js: JetStreamContext, stream: str, *, made: bool = False) -> api.StreamInfo:
    """The info of `stream` once it has a leader: until a stream just made on a cluster has elected one, requests
    for it go unanswered. `NotFoundError` when it is missing, unless it was just `made` (then it is waited for: the
    cluster's servers learn of a new stream a moment after it is made)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LEADER_SECONDS
    waited: tuple[type[Exception], ...] = (
        TimeoutError,
        nats.errors.TimeoutError,
        nats.js.errors.ServiceUnavailableError,
    )
    if made:
        waited += (nats.js.errors.NotFoundError,)
    while True:
        try:
            info = await js.stream_info(stream)
            if info.cluster is None or info.cluster.leader or loop.time() > deadline:
                return info
        except waited:
            if loop.time() > deadline:
                raise
        await asyncio.sleep(0.1)


async def key_value(js: JetStreamContext, bucket: str, replicas: int, **config: Any) -> KeyValue:
    """The KV bucket `bucket` on `replicas` servers: created with `config` when missing, else moved there."""
    try:
        await replicate(js, f"KV_{bucket}", replicas)
    except nats.js.errors.NotFoundError:
        with contextlib.suppress(nats.js.errors.BadRequestError):  # another process made it meanwhile
            await _placed(
                f"KV_{bucket}", replicas, lambda: js.create_key_value(bucket=bucket, replicas=replicas, **config)
            )
        await led_info(js, f"KV_{bucket}", made=True)
    return await js.key_value(bucket)


async def _placed(stream: str, replicas: int, declare: Callable[[], Awaitable[object]]) -> None:
    """`declare()`, asked again while a cluster has too few JetStream servers for the replicas (for up to
    `PEERS_SECONDS`: its servers may still be joining); JetStream refusing them for good becomes a `SettingsError`
    naming the variable."""
    deadline = asyncio.get_running_loop().time() + PEERS_SECONDS
    warned = False
    while True:
        try:
            await declare()
            return
        except nats.js.errors.APIError as error:
            why = REFUSALS.get(error.err_code or 0)
            if why is None:
                raise
            if error.err_code == NOT_CLUSTERED or asyncio.get_running_loop().time() > deadline:
                raise SettingsError(
                    f"CORRAL_REPLICAS {replicas!r}: NATS cannot keep {stream} on {replicas} servers ({why}: "
                    f"{error.description}); it must be at most the number of JetStream servers of the cluster"
                ) from None
            if not warned:
                log.warning(
                    "stream %s: %s for %d replicas (%s); asking again for up to %gs while servers join",
                    stream,
                    why,
                    replicas,
                    error.description,
                    PEERS_SECONDS,
                )
                warned = True
        await asyncio.sleep(0.5)
