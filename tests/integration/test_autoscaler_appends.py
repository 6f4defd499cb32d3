"""Appends whose acks are lost, against real servers. The autoscaler's decisions (`Decisions.append`): a decision
stored whose ack never came is reported stored, is in the log once and folded once; one met by another writer's
decision stops the append there, and the next round's decisions follow it, nothing doubled. Any other writer's
batch (`Bus.append` without an expected sequence) is published again and stored once, within the duplicate window;
past it (acks lost, a publish lost, NATS down for longer), the bus finds what is stored and publishes only the rest.

Acks are lost in the client: the stream stores the message, and the bus never hears of it (it publishes again
after its ack wait, by then past the stream's duplicate window when the test sets it short)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from nats.aio.msg import Msg

from schemas import AnyEvent, NodesLaunchRequested
from schemas import subjects as s
from services.autoscaler.app import Decisions
from services.autoscaler.view import AutoscalerView
from services.client import Client
from services.local.mesh import Mesh
from services.runtime import appends
from services.runtime.codec import encode
from services.runtime.service import Shell, service_shell
from services.runtime.settings import Settings
from tests.integration.autoscaling import events_of

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

DUPLICATE_WINDOW = 0.1
"""The stream's duplicate window here: a publish repeated after the ack wait (0.3 s) is past it."""


def launch(event_id: str, launch_id: str) -> NodesLaunchRequested:
    """A decision to launch one cpu-4 node."""
    return NodesLaunchRequested(
        event_id=event_id, node_type="cpu-4", launch_ids=[launch_id], reason="test", requested_at=1.0
    )


@asynccontextmanager
async def following(mesh: Mesh, *, short_window: bool = True) -> AsyncIterator[tuple[Shell, AutoscalerView]]:
    """An autoscaler's shell on the mesh's servers, its view following the log (no decider running); the event
    stream's duplicate window is made short unless not `short_window`."""
    view = AutoscalerView()
    async with service_shell(Settings.from_env(mesh.env), "autoscaler", view) as shell:
        if short_window:
            await window_of(shell, DUPLICATE_WINDOW)
        async with anyio.create_task_group() as group:
            group.start_soon(shell.follower.run)
            yield shell, view
            group.cancel_scope.cancel()


async def window_of(shell: Shell, seconds: float) -> None:
    """The event stream's duplicate window made `seconds` long."""
    config = (await shell.bus.js.stream_info(s.EVENTS_STREAM)).config
    await shell.bus.js.update_stream(dataclasses.replace(config, duplicate_window=seconds))


def on_acks(shell: Shell, monkeypatch: pytest.MonkeyPatch, hook: Callable[[int, int], Awaitable[bool]]) -> None:
    """Before the bus hears the stream's ack number n (1, 2, ...), saying the message was stored at `sequence` (0:
    refused), `hook(n, sequence)` runs; it returns whether the ack is lost (never delivered). The bus waits 0.3 s
    for an ack before publishing again."""
    deliver, seen = shell.bus._on_ack, [0]

    async def on_ack(msg: Msg) -> None:
        seen[0] += 1
        if not await hook(seen[0], json.loads(msg.data).get("seq", 0)):
            await deliver(msg)

    monkeypatch.setattr(shell.bus, "_on_ack", on_ack)
    monkeypatch.setattr(appends, "APPEND_ACK_SECONDS", 0.3)


async def append_as_rival(client: Client, event: AnyEvent, after: int) -> None:
    """Another instance appends a decision, expecting the subject's last sequence to be `after`."""
    headers = {"Nats-Msg-Id": event.event_id, "Nats-Expected-Last-Subject-Sequence": str(after)}
    await client.bus.js.publish(s.AUTOSCALER_DECISIONS, encode(event), headers=headers)


async def lost_first(n: int, _sequence: int) -> bool:
    """The first ack is lost."""
    return n == 1


def ids_in(events: list[AnyEvent]) -> list[str]:
    """The ids of the launch decisions among `events`, in log order."""
    return [event.event_id for event in events if isinstance(event, NodesLaunchRequested)]


async def test_a_decision_stored_whose_ack_was_lost_is_reported_stored_and_is_in_the_log_once(
    servers: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Publishing it again is refused (the subject's last is no longer what the append expected), and the append
    finds its decision there: reported stored, in the log once, folded once."""
    async with following(servers) as (shell, view):
        on_acks(shell, monkeypatch, lost_first)
        first, folded = launch("e1", "L1"), shell.follower.folded
        assert await Decisions(shell).append([first], shell.follower.sequence) == [first]
        assert ids_in(await events_of(servers)) == ["e1"]
        await shell.caught_up()
        assert shell.follower.folded == folded + 1 and list(view.cluster.launches) == ["L1"]


async def test_a_decision_met_by_another_writers_stops_the_append_there_and_the_next_round_follows_it(
    servers: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rival appends right after our first decision is stored: the second is not appended, the first is
    reported stored; the next round, on a view that folded the rival's decision, appends after it."""
    async with following(servers) as (shell, view), Client(servers.nats_url) as rival:
        first = launch("e1", "L1")

        async def rival_after_first(n: int, sequence: int) -> bool:
            if n == 1:
                await append_as_rival(rival, launch("rival", "L2"), after=sequence)
            return False

        on_acks(shell, monkeypatch, rival_after_first)
        decisions = Decisions(shell)
        assert await decisions.append([first, launch("e2", "L3")], shell.follower.sequence) == [first]
        await shell.caught_up()
        assert sorted(view.cluster.launches) == ["L1", "L2"]
        again = launch("e3", "L3")
        assert await decisions.append([again], shell.follower.sequence) == [again]
        assert ids_in(await events_of(servers)) == ["e1", "rival", "e3"]


async def test_a_decision_whose_ack_was_lost_and_after_which_another_writer_appended_is_reported_stored(
    servers: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our decision is stored, its ack lost, and the rival appends after it: publishing it again is refused (the
    subject's last is the rival's), yet ours is in the log, so it counts as stored (its launch is then started);
    the next decision is not appended."""
    async with following(servers) as (shell, view), Client(servers.nats_url) as rival:
        first = launch("e1", "L1")

        async def lost_then_rival(n: int, sequence: int) -> bool:
            if n == 1:
                await append_as_rival(rival, launch("rival", "L2"), after=sequence)
            return n == 1

        on_acks(shell, monkeypatch, lost_then_rival)
        assert await Decisions(shell).append([first, launch("e2", "L3")], shell.follower.sequence) == [first]
        assert ids_in(await events_of(servers)) == ["e1", "rival"]
        await shell.caught_up()
        assert sorted(view.cluster.launches) == ["L1", "L2"]


async def test_a_batch_whose_last_ack_was_lost_is_published_again_and_stored_once_within_the_duplicate_window(
    servers: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer's append (no expected sequence): the ack of the batch's second event is lost, the whole
    batch is published again, the stream answers both as duplicates: the sequences first given, each event once."""
    async with following(servers, short_window=False) as (shell, view):
        acks: list[int] = []

        async def second_lost(n: int, sequence: int) -> bool:
            acks.append(sequence)
            return n == 2

        on_acks(shell, monkeypatch, second_lost)
        batch = [launch("e1", "L1"), launch("e2", "L2")]
        assert await shell.bus.append(batch) == acks[:2] == acks[2:]
        assert ids_in(await events_of(servers)) == ["e1", "e2"]
        await shell.caught_up()
        assert sorted(view.cluster.launches) == ["L1", "L2"]


@asynccontextmanager
async def appending(shell: Shell, event: AnyEvent) -> AsyncIterator[list[list[int]]]:
    """`event` appended in the background while the block runs; after it, the sequences the append returned."""
    sequences: list[list[int]] = []
    async with anyio.create_task_group() as group:

        async def append() -> None:
            sequences.append(await shell.bus.append([event]))

        group.start_soon(append)
        yield sequences


def short_window_known(shell: Shell, seconds: float = DUPLICATE_WINDOW) -> None:
    """The bus counts on the stream's short duplicate window (as it counts on the 120 s one in production)."""
    shell.bus.duplicate_window = seconds


async def test_a_batch_whose_acks_were_lost_is_not_stored_again_past_the_duplicate_window(
    servers: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both events are stored and both acks lost; the retry comes after the stream forgot their ids: the bus finds
    them in the log instead of publishing them again. The sequences first given, each event once."""
    async with following(servers) as (shell, view):
        short_window_known(shell)
        acks: list[int] = []

        async def first_two_lost(n: int, sequence: int) -> bool:
            acks.append(sequence)
            return n <= 2

        on_acks(shell, monkeypatch, first_two_lost)
        assert await shell.bus.append([launch("e1", "L1"), launch("e2", "L2")]) == acks
        assert ids_in(await events_of(servers)) == ["e1", "e2"]
        await shell.caught_up()
        assert sorted(view.cluster.launches) == ["L1", "L2"]


async def test_a_batch_whose_second_event_never_reached_the_stream_is_completed_past_the_duplicate_window(
    servers: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first event is stored and acked, the second's publish is lost on its way: after the stream forgot the
    first's id, only the second is published again. Each event once, the first at its original sequence."""
    async with following(servers) as (shell, view):
        short_window_known(shell)
        acks: list[int] = []

        async def none_lost(_n: int, sequence: int) -> bool:
            acks.append(sequence)
            return False

        on_acks(shell, monkeypatch, none_lost)
        publish, appended = shell.bus.nc.publish, [0]

        async def second_lost(subject: str, payload: bytes = b"", reply: str = "", headers: Any = None) -> None:
            if "Nats-Msg-Id" in (headers or {}):
                appended[0] += 1
                if appended[0] == 2:
                    return
            await publish(subject, payload, reply=reply, headers=headers)

        monkeypatch.setattr(shell.bus.nc, "publish", second_lost)
        assert await shell.bus.append([launch("e1", "L1"), launch("e2", "L2")]) == acks
        assert ids_in(await events_of(servers)) == ["e1", "e2"]
        await shell.caught_up()
        assert sorted(view.cluster.launches) == ["L1", "L2"]


async def test_a_batch_stored_before_nats_went_down_for_longer_than_the_duplicate_window_is_stored_once(
    servers: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server stores the event and stops before its ack is sent; it is back after the stream's window (2 s
    here, so the first retry comes within its first half). The bus publishes nothing while disconnected (nats-py
    would hold the copy and send it on reconnecting, past the window: a second message), then finds the event
    in the log. The sequence first given, the event once."""
    window = 2.0
    async with following(servers) as (shell, view):
        await window_of(shell, window)
        short_window_known(shell, window)
        acks: list[int] = []
        down = anyio.Event()

        async def stop_after_first(n: int, sequence: int) -> bool:
            acks.append(sequence)
            if n == 1:
                servers.nats.stop()
                down.set()
            return n == 1

        on_acks(shell, monkeypatch, stop_after_first)
        async with appending(shell, launch("e1", "L1")) as sequences:
            await down.wait()
            await anyio.sleep(window * 1.5)  # down past the window, with retries due all along
            servers.nats.start()
        assert sequences == [acks[:1]]
        assert ids_in(await events_of(servers)) == ["e1"]
        await shell.caught_up()
        assert list(view.cluster.launches) == ["L1"]


async def test_a_decision_the_server_refuses_midway_leaves_those_stored_before_it_reported_stored(
    servers: Mesh,
) -> None:
    """The second decision is over the server's payload limit (nats-py refuses to publish it): the first, stored,
    is reported stored (so its launch is started) instead of the whole round failing with it unstarted."""
    async with following(servers, short_window=False) as (shell, view):
        first = launch("e1", "L1")
        huge = NodesLaunchRequested(
            event_id="e2", node_type="cpu-4", launch_ids=["L2"], reason="x" * shell.bus.nc.max_payload
        )
        assert await Decisions(shell).append([first, huge], shell.follower.sequence) == [first]
        await shell.caught_up()
        assert ids_in(await events_of(servers)) == ["e1"] and list(view.cluster.launches) == ["L1"]


async def test_a_copy_nats_py_still_held_unwritten_when_the_connection_dropped_is_not_sent_after_the_outage(
    servers: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The event is stored and its ack lost; the retry's copy is still unwritten in nats-py when the connection drops
    (kept there by hand: in life the race is a few microseconds wide), and NATS is back after the stream's window.
    nats-py writes what it holds on reconnecting, past the window, so the log held the event twice (before); the bus
    now drops it on the disconnection and finds the event in the log. The event once, at the sequence first given."""
    window = 2.0
    async with following(servers) as (shell, view):
        await window_of(shell, window)
        short_window_known(shell, window)
        acks: list[int] = []

        async def first_lost(n: int, sequence: int) -> bool:
            acks.append(sequence)
            return n == 1

        on_acks(shell, monkeypatch, first_lost)
        nc, copies, held = shell.bus.nc, [0], anyio.Event()
        publish = nc.publish

        async def unwritten(force_flush: bool = False) -> None:
            """nats-py's flush, held back."""

        async def retry_held(subject: str, payload: bytes = b"", reply: str = "", headers: Any = None) -> None:
            if "Nats-Msg-Id" in (headers or {}):
                copies[0] += 1
                if copies[0] == 2:  # the retry: kept unwritten, then the server goes
                    setattr(nc, "_flush_pending", unwritten)  # noqa: B010
                    held.set()
            await publish(subject, payload, reply=reply, headers=headers)

        monkeypatch.setattr(nc, "publish", retry_held)
        async with appending(shell, launch("e1", "L1")) as sequences:
            await held.wait()
            servers.nats.stop()
            with anyio.fail_after(10):
                while nc.is_connected:
                    await anyio.sleep(0.01)
            delattr(nc, "_flush_pending")  # nats-py writes what it holds once it reconnects
            await anyio.sleep(window * 1.5)
            servers.nats.start()
        assert copies[0] >= 2 and sequences == [acks[:1]]
        assert ids_in(await events_of(servers)) == ["e1"]
        await shell.caught_up()
        assert list(view.cluster.launches) == ["L1"]
