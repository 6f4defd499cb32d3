"""The client's connection and request plumbing: commands and queries (request/reply) and durable requests."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

import msgspec
import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js import api

from schemas import subjects as s
from schemas.commands import CreatePlacementGroup, RequestBatch, SchedulerRequest, SubmitActor
from schemas.decisions import Pending, Placed
from schemas.queries import DecisionQuery
from schemas.replies import Accepted, BatchReply, CommandReply, Rejected, RequestReply
from services.client.deadlines import check, deadline_in
from services.client.errors import raise_for
from services.core.amounts import check_amounts
from services.core.errors import (
    ConflictError,
    CorralError,
    NotFoundError,
    StorageFullError,
    TooLargeError,
    UnavailableError,
)
from services.core.request import check_same_keyed
from services.runtime import refusals
from services.runtime.bus import Bus
from services.runtime.codec import decode, encode
from services.runtime.connection import BusUnreachable
from services.runtime.room import WHAT_TO_DO, no_room
from services.runtime.settings import Settings

RESENT_POLL_SECONDS = 0.05
"""How often a resent request asks for the decision its first sending led to."""

STORE_RETRY_SECONDS = 0.1
"""How often a durable request is published again while no stream answers for it (a stream electing its leader)."""

STORE_ATTEMPT_SECONDS = 2.0
"""How long one publish of a durable request waits for JetStream's ack before it is sent again: a message sent to a
stream leader that just died is lost without an answer, and its stream elects a new leader within seconds."""

ELECTING = "the event log is electing a leader (NATS JetStream cluster); try again"
"""Why a request found no stream to store it for a while, most likely."""

LIST_ATTEMPTS = 3
"""How many times a paged listing starts again when the service no longer holds it (the log moved on)."""


def joined(pages: list[Any]) -> Any:
    """One answer from its pages: lists concatenated, dicts merged, the other fields as the first page has them."""
    merged: dict[str, Any] = {}
    for name in pages[0].__struct_fields__:
        first = getattr(pages[0], name)
        if isinstance(first, list):
            merged[name] = [item for page in pages for item in getattr(page, name)]
        elif isinstance(first, dict):
            merged[name] = {key: value for page in pages for key, value in getattr(page, name).items()}
    return msgspec.structs.replace(pages[0], **merged, next="")


class Connection:
    """A NATS connection and the three ways the client speaks over it; the client's method groups build on it."""

    def __init__(
        self, url: str | None = None, *, name: str = "corral-client", timeout: float = 5.0, redis_url: str | None = None
    ) -> None:
        settings = Settings.from_env()
        chosen = {"nats_url": url or settings.nats_url, "redis_url": redis_url or settings.redis_url}
        self.settings = Settings(**{**settings.__dict__, **chosen})
        self.name, self.timeout = name, timeout
        self._bus: Bus | None = None
        self._replies = Replies(lambda: self.bus)

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    async def connect(self) -> None:
        """Open the connection, retried while the server starts: `UnavailableError` after `timeout` seconds."""
        try:
            reconnected = self._reconnected
            self._bus = await Bus.connect(self.settings, self.name, on_reconnect=reconnected, timeout=self.timeout)
        except BusUnreachable as error:
            raise UnavailableError(str(error)) from None

    async def _reconnected(self) -> None:
        """Runs after NATS reconnects (subclasses re-announce what they own)."""

    async def close(self) -> None:
        """Close the connection."""
        if self._bus is not None:
            await self._bus.close()

    @property
    def bus(self) -> Bus:
        """The connection (connect first)."""
        if self._bus is None:
            raise RuntimeError("the client is not connected: use `async with Client(...)` or `await connect()`")
        return self._bus

    def _payload(self, subject: str, message: object) -> bytes:
        """`message` checked and encoded (see `outgoing`), or `TooLargeError` when it is over the server's payload
        limit (nothing is sent)."""
        data = outgoing(message)
        limit = self.bus.nc.max_payload
        if len(data) > limit:
            text = f"{subject}: the request is {len(data)} bytes, over the bus's payload limit of {limit} bytes"
            raise TooLargeError(text)
        return data

    async def _ask(self, subject: str, message: object, kind: Any, timeout: float | None = None) -> Any:
        try:
            reply = await self.bus.nc.request(subject, self._payload(subject, message), timeout=timeout or self.timeout)
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError) as error:
            service = subject.split(".")[2]
            raise UnavailableError(f"the {service} service did not answer on {subject} ({error!r})") from None
        answer = decode(reply.data, kind | Rejected)
        if isinstance(answer, Rejected):
            raise_for(answer)
        return answer

    async def _list(self, subject: str, query: Any, kind: Any, limit: int | None = None) -> Any:
        """A list query read page after page, as one answer (each list at most `limit` long when given).

        Every page comes from the same point in the log; when the service no longer holds the listing (it is old,
        or another instance answered after the log moved on), the listing starts again, a few times at most.
        """
        query = msgspec.structs.replace(query, cursor="", limit=limit or 0)
        for attempt in range(LIST_ATTEMPTS):
            pages = [await self._ask(subject, query, kind)]
            try:
                while pages[-1].next:
                    pages.append(await self._ask(subject, msgspec.structs.replace(query, cursor=pages[-1].next), kind))
            except ConflictError:
                if attempt == LIST_ATTEMPTS - 1:
                    raise
                continue
            return joined(pages)
        raise AssertionError("unreachable")

    async def _command(self, subject: str, command: object) -> Accepted:
        answer: Accepted = await self._ask(subject, command, CommandReply)
        return answer

    async def _durable(self, subject: str, request: Any, timeout: float | None) -> RequestReply:
        """Publish a durable request and wait for the scheduler's reply (a resend is stored once).

        A request without a `command_id` gets a fresh `Nats-Msg-Id`, so the stream can only find it a duplicate of
        this call's own earlier sending (its ack lost): the first sending, stored, names this call's inbox, whose
        answer is awaited as usual. A keyed request may repeat another call's: `_duplicate_answer` decides."""
        reply = await self._exchange(subject, request, request.command_id, RequestReply, timeout)
        if isinstance(reply, Rejected):
            raise_for(reply)
        answer: RequestReply = reply
        return answer

    async def _durable_batch(self, batch: RequestBatch, timeout: float | None) -> list[RequestReply]:
        """Publish a batch of durable requests (stored once, under a fresh `Nats-Msg-Id`) and wait for the answers,
        one per request in its order; a `Rejected` for the whole batch (unreadable) is raised."""
        reply = await self._exchange(s.BATCH, batch, "", BatchReply | Rejected, timeout)
        if isinstance(reply, Rejected):
            raise_for(reply)
        assert isinstance(reply, BatchReply), reply
        if len(reply.replies) != len(batch.requests):
            raise UnavailableError(f"{len(reply.replies)} answers to a batch of {len(batch.requests)} requests")
        return reply.replies

    async def _exchange(self, subject: str, request: Any, key: str, kind: Any, timeout: float | None) -> Any:
        """Store `request` (under its idempotency `key`, if any) and its answer read as `kind`."""
        inbox, answer = await self._replies.expect()
        headers = {"Nats-Msg-Id": key or uuid.uuid4().hex, s.REPLY_HEADER: inbox}
        if key:
            headers[s.KEY_HEADER] = key
        try:
            payload = self._payload(subject, request)
            stored = await self._stored(subject, payload, headers, timeout or self.timeout)
            if stored.duplicate and key:  # without a key, a duplicate is this call's own resend
                return await self._duplicate_answer(request, payload, stored.seq, timeout or self.timeout)
            async with asyncio.timeout(timeout or self.timeout):
                data = await answer
        except (TimeoutError, nats.errors.TimeoutError, nats.errors.NoRespondersError) as error:
            raise UnavailableError(f"no decision within {timeout or self.timeout}s for {subject}: {error!r}") from None
        finally:
            self._replies.forget(inbox)
        return decode(data, kind)

    async def _stored(self, subject: str, payload: bytes, headers: dict[str, str], timeout: float) -> api.PubAck:
        """The request stored in the requests stream: published again (its `Nats-Msg-Id` has it stored once) while
        no stream answers for it (a NATS cluster electing the stream's leader), for `timeout` seconds at most;
        `StorageFullError` at once when JetStream has no room for it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                left = max(deadline - loop.time(), STORE_RETRY_SECONDS)
                attempt = min(left, STORE_ATTEMPT_SECONDS)
                return await self.bus.js.publish(subject, payload, headers=headers, timeout=attempt)
            except nats.js.errors.APIError as error:
                full = no_room(error)
                if full:
                    text = f"the request queue is full: {full}; {subject} was not stored; {WHAT_TO_DO}"
                    raise StorageFullError(text) from None
                if not isinstance(error, nats.js.errors.ServiceUnavailableError):  # not a leader missing: a bug
                    raise
            except nats.js.errors.NoStreamResponseError:
                pass
            except (TimeoutError, nats.errors.TimeoutError):
                if loop.time() >= deadline:
                    raise UnavailableError(
                        f"JetStream did not confirm {subject} within {timeout:g}s: a NATS server is down, or {ELECTING}"
                    ) from None
                continue  # lost on its way to a stream leader that died: sent again (its `Nats-Msg-Id` stores it once)
            if loop.time() + STORE_RETRY_SECONDS > deadline:
                raise UnavailableError(await self._not_stored(subject, timeout))
            await asyncio.sleep(STORE_RETRY_SECONDS)

    async def _not_stored(self, subject: str, timeout: float) -> str:
        """Why no stream stored a request on `subject` within `timeout` seconds: the requests stream is missing, or
        (it exists, or does not say) its NATS cluster is electing its leader."""
        try:
            await self.bus.nc.jetstream(timeout=1.0).stream_info(s.REQUESTS_STREAM)
        except nats.js.errors.NotFoundError:
            return (
                f"no stream stores {subject} (the requests stream {s.REQUESTS_STREAM} is missing; the scheduler "
                "declares it as it starts): retry"
            )
        except (TimeoutError, nats.errors.Error):
            pass
        return f"no stream stored {subject} within {timeout:g}s: {ELECTING}"

    async def _duplicate_answer(self, request: Any, payload: bytes, sequence: int, timeout: float) -> RequestReply:
        """The answer to a sending the stream dropped as a duplicate of the request stored at `sequence` (its key was
        used within the duplicate window): a `ConflictError` naming the key when that request is another one, else
        the answer to a resend (`_resent_answer`)."""
        stored = await self._stored_request(request.command_id, sequence)
        limit = self.bus.nc.max_payload
        try:
            first: object = decode(stored, SchedulerRequest, max_bytes=limit)
        except CorralError:
            first = None
        check_same_keyed(request.command_id, first, decode(payload, SchedulerRequest, max_bytes=limit))
        return await self._resent_answer(request, sequence, timeout)

    async def _stored_request(self, key: str, sequence: int) -> bytes:
        """The request stored at `sequence` as the stream holds it: from the work queue while it waits there, else as
        its decider kept it before the ack (`refusals`); `UnavailableError` when neither holds it."""
        try:
            return (await self.bus.js.get_msg(s.REQUESTS_STREAM, sequence)).data or b""
        except nats.js.errors.NotFoundError:
            pass  # decided and acked
        except (TimeoutError, nats.errors.Error) as error:
            text = f"command_id {key!r}: the request it was first used for could not be read ({error!r}): retry"
            raise UnavailableError(text) from None
        kept = await refusals.kept_request(self.bus.js, sequence)
        if kept is None:
            raise UnavailableError(
                f"command_id {key!r} was used within the duplicate window for a request that is no longer kept "
                "(its record was deleted, or it was sent without the key's header): cannot tell whether it is this "
                "one; use a new key"
            )
        return kept

    async def _resent_answer(self, request: Any, sequence: int, timeout: float) -> RequestReply:
        """The answer to a request whose id the log already holds (its first sending's reply may have been lost in
        an outage): the decision it led to for work, once the scheduler has made it; for a removal or a failure
        report, that it is received and applied once. A refusal of the first sending (stored at `sequence`), kept
        in the refusals bucket, is raised (a refusal leaves no decision to ask for)."""
        await self._raise_refusal(sequence)
        if not isinstance(request, SubmitActor | CreatePlacementGroup):
            what = type(request).__name__
            return Accepted(message=f"{what} {request.command_id!r} was received before: it is applied once")
        query = (
            DecisionQuery(request.request.actor_id)
            if isinstance(request, SubmitActor)
            else DecisionQuery(request.request.pg_id, "placement_group")
        )
        deadline = deadline_in(timeout)
        try:
            async with asyncio.timeout_at(deadline):
                while True:
                    check(deadline)
                    with contextlib.suppress(NotFoundError):  # still waiting in the scheduler's queue, or refused
                        answer: RequestReply = await self._ask(s.DECISION_QUERY, query, Placed | Pending)
                        return answer
                    await asyncio.sleep(RESENT_POLL_SECONDS)
                    await self._raise_refusal(sequence)
        except TimeoutError:
            raise UnavailableError(
                f"{query.kind} {query.id!r}: a request with id {request.command_id!r} was received before, and no "
                f"decision for it is known within {timeout:g}s (it may still wait in the scheduler's queue, or be "
                "set aside: see `corral dead-letters`)"
            ) from None

    async def _raise_refusal(self, sequence: int) -> None:
        """Raise the refusal of the request stored at `sequence`, if the refusals bucket keeps one (an unreadable
        entry there counts as none)."""
        refused = await refusals.kept(self.bus.js, sequence, self.bus.nc.max_payload)
        if refused is not None:
            raise_for(refused)


class Replies:
    """The inboxes durable requests are answered on: one subscription (`<prefix>.*`) for all of a connection's.

    A subscription per request would cost the client and the server a subscribe and an unsubscribe each time.
    """

    def __init__(self, bus: Callable[[], Bus]) -> None:
        self.bus = bus
        self.connection: object = None
        self.prefix = ""
        self.count = 0
        self.waiting: dict[str, asyncio.Future[bytes]] = {}

    async def expect(self) -> tuple[str, asyncio.Future[bytes]]:
        """A fresh inbox and the future its first reply's bytes land in (`forget` it once answered or given up)."""
        nc = self.bus().nc
        if self.connection is not nc:  # the first request on this connection (the client may connect again)
            self.connection, self.prefix = nc, nc.new_inbox()  # before awaiting: a concurrent request uses them too
            await nc.subscribe(self.prefix + ".*", cb=self._arrived)
        self.count += 1
        inbox = f"{self.prefix}.{self.count}"
        self.waiting[inbox] = future = asyncio.get_running_loop().create_future()
        return inbox, future

    def forget(self, inbox: str) -> None:
        """Stop waiting on `inbox` (a late reply to it is dropped)."""
        self.waiting.pop(inbox, None)

    async def _arrived(self, msg: Msg) -> None:
        future = self.waiting.pop(msg.subject, None)
        if future is not None and not future.done():
            future.set_result(msg.data)


def outgoing(message: object) -> bytes:
    """A message as bytes once its numbers are checked: a `RejectedError` naming the field, the value and the rule
    for one that is not finite or is out of bounds (nothing is sent)."""
    if isinstance(message, msgspec.Struct):
        check_amounts(message)
    return encode(message)
