"""Locust users that speak NATS to Corral: `corral loadtest -H nats://127.0.0.1:4222` (locust -f this file).

Each user holds its own connection and works as the load test's closed-loop users do: it sends a durable schedule
request drawn from the workload mix (loadtest/workloads.py), waits for the decision, and removes its oldest actor
once it holds more than `--corral-hold`. Every request is reported to locust (type NATS, named by its subject kind
and workload), so the web UI, `--headless`, `--csv` and distributed runs (`--processes N`, or a master and workers
on several machines) all work. `--corral-nodes N` registers N simulated nodes first (heartbeating until the end).

nats-py speaks asyncio and locust runs on gevent: every connection of a process lives on one asyncio loop in a
native thread (gevent's patched selectors do not reach it), and a user's greenlet waits for its request without
blocking the others.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
import selectors
import time
import zlib
from collections import Counter, deque
from collections.abc import Coroutine
from typing import Any, TypeVar

import gevent.event
from gevent import monkey
from locust import User, constant, events, task
from locust.env import Environment
from locust.runners import WorkerRunner

from loadtest.nodes import node_shapes, register_nodes, wait_until_seen
from loadtest.transport import Connection, Replies, durable_request
from loadtest.workloads import REMOVE, Mix, Ticket
from schemas import Pending, Placed
from schemas import subjects as s
from schemas.commands import RemoveActor, SubmitActor
from schemas.replies import Rejected, RequestReply
from services.client import Client
from services.client.errors import raise_for
from services.runtime.codec import decode, encode
from services.runtime.settings import Settings

T = TypeVar("T")


class AsyncioThread:
    """An asyncio loop running in a native thread of its own; greenlets run coroutines on it and wait."""

    def __init__(self) -> None:
        patched = monkey.is_module_patched("selectors")
        selector = monkey.get_original("selectors", "DefaultSelector") if patched else selectors.DefaultSelector
        self.loop = asyncio.SelectorEventLoop(selector())
        gevent.get_hub().threadpool.spawn(self.loop.run_forever)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the loop and return its result; only the calling greenlet waits."""
        result: gevent.event.AsyncResult = gevent.event.AsyncResult()

        def done(future: Any) -> None:
            error = future.exception()
            result.set_exception(error) if error is not None else result.set(future.result())

        asyncio.run_coroutine_threadsafe(coroutine, self.loop).add_done_callback(done)
        return result.get()  # type: ignore[no-any-return]


@functools.cache
def asyncio_thread() -> AsyncioThread:
    """This process's loop thread, started on first use (after locust forked its worker processes)."""
    return AsyncioThread()


@events.init_command_line_parser.add_listener
def _options(parser: Any) -> None:
    parser.add_argument("--corral-nodes", type=int, default=0, help="simulated nodes to register first (0: none)")
    parser.add_argument("--corral-hold", type=int, default=20, help="a user removes its oldest actor above this")
    parser.add_argument("--corral-timeout", type=float, default=10.0, help="seconds to wait for a decision")


def nats_url(environment: Environment) -> str:
    """`--host` when given, else `CORRAL_NATS_URL` (or its default)."""
    return environment.host or Settings.from_env().nats_url


class Nodes:
    """The simulated nodes of `--corral-nodes`: registered when the test starts, heartbeating until it stops."""

    client: Client | None = None

    @classmethod
    def start(cls, environment: Environment) -> None:
        count = environment.parsed_options.corral_nodes if environment.parsed_options else 0
        if count <= 0 or isinstance(environment.runner, WorkerRunner) or cls.client is not None:
            return
        prefix = f"locust-{secrets.token_hex(3)}"
        client = cls.client = Client(nats_url(environment), name="locust-nodes", timeout=10.0)
        thread = asyncio_thread()
        thread.run(client.connect())
        thread.run(register_nodes([client], node_shapes(count, prefix), quiet=True))
        thread.run(wait_until_seen(client, prefix, count))

    @classmethod
    def stop(cls) -> None:
        if cls.client is not None:
            asyncio_thread().run(cls.client.close())
            cls.client = None


events.test_start.add_listener(lambda environment, **_kwargs: Nodes.start(environment))
events.quitting.add_listener(lambda **_kwargs: Nodes.stop())


class CorralUser(User):
    """One user: a connection, durable schedule requests one at a time, removals beyond its hold."""

    wait_time = constant(0)

    def on_start(self) -> None:
        options = self.environment.parsed_options
        self.hold = options.corral_hold if options else 20
        self.timeout = options.corral_timeout if options else 10.0
        self.thread = asyncio_thread()
        self.name = f"u{secrets.token_hex(4)}"  # drawn here: locust forks `--processes` workers after importing us
        self.mix = Mix(zlib.crc32(self.name.encode()))
        self.sent: Counter[str] = Counter()
        self.held: deque[str] = deque()
        client = Client(nats_url(self.environment), name=f"locust-{self.name}", timeout=self.timeout)
        self.thread.run(client.connect())
        self.conn = Connection(client, Replies(client))
        self.thread.run(self.conn.replies.start())

    def on_stop(self) -> None:
        self.thread.run(self.conn.client.close())

    @task
    def request(self) -> None:
        """Remove the oldest actor when holding too many, else submit one of the workload mix."""
        if len(self.held) > self.hold:
            actor_id = self.held.popleft()
            self.send(REMOVE, s.REMOVE_ACTOR, encode(RemoveActor(actor_id=actor_id)), f"rm-{actor_id}")
            return
        workload = self.mix.draw()
        ticket = Ticket(f"{self.name}-{self.sent.total()}", self.name, self.sent[workload.name])
        self.sent[workload.name] += 1
        request = SubmitActor(request=workload.build(ticket))
        reply = self.send(f"schedule {workload.name}", s.SCHEDULE, encode(request), ticket.actor_id)
        if isinstance(reply, Placed | Pending):
            self.held.append(ticket.actor_id)

    def send(self, name: str, subject: str, payload: bytes, msg_id: str) -> RequestReply | None:
        """One durable request and its reply, reported to locust; the reply (None when it failed)."""
        started = time.perf_counter()
        reply: RequestReply | None = None
        data = b""
        error: Exception | None = None
        try:
            started, finished, data = self.thread.run(
                durable_request(self.conn, subject, payload, msg_id, self.timeout)
            )
            reply = decode(data, RequestReply)
            if isinstance(reply, Rejected):
                raise_for(reply)  # its RejectedError is the failure locust reports
        except TimeoutError:
            finished = time.perf_counter()
            error = TimeoutError(f"no reply to {name} (Nats-Msg-Id {msg_id!r}) within {self.timeout:g} s")
        except Exception as failure:  # a load test counts every failure (rejections, lost connections)
            finished, error = time.perf_counter(), failure
        self.environment.events.request.fire(
            request_type="NATS",
            name=name,
            response_time=(finished - started) * 1000,
            response_length=len(data),
            exception=error,
            context={},
        )
        return reply
