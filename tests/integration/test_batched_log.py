"""The scheduler appends what it decided for a batch of requests as batch messages (`subjects.batch_subject`): the
log holds fewer messages than events, every reader folds each event, and what looks an event up by its own subject
(history, `why-placed`, AGE) still finds the events inside a batch."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator

import nats.js.errors
import pytest

from schemas import ActorPlaced, Placed, ScheduleRequest
from schemas import subjects as s
from services.cli.records import first_records
from services.client import Client
from services.local.mesh import Mesh
from tests.integration.conftest import bus_of, holds_within, start_test_mesh
from tests.integration.test_restart_and_snapshots import digest_of_a_replay_at
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory, server_path: ServerPath) -> Iterator[Mesh]:
    """One mesh for this module's tests (each uses its own ids and nodes)."""
    running = start_test_mesh(tmp_path_factory.mktemp("batches") / "mesh", server_path)
    try:
        yield running
    finally:
        running.close()


async def test_a_batch_of_requests_is_appended_as_one_message_and_its_events_are_found_by_id(
    client: Client, mesh: Mesh
) -> None:
    for index in range(4):
        await client.register_node(f"bn{index}", {"CPU": 100})
    requests = [ScheduleRequest(f"batched-{index:02d}", {"CPU": 1 + index % 3}) for index in range(60)]
    decisions = await asyncio.gather(*(client.submit(request) for request in requests))
    assert all(isinstance(decision, Placed) for decision in decisions)
    async with bus_of(mesh, "test-batches") as bus:
        entries = [entry async for entry in bus.read_held()]
    inside = [entry for entry in entries if entry.index > 0]
    assert inside, "sixty requests at once were all appended one message each"
    assert all(entry.subject == s.batch_subject(s.ACTOR) for entry in inside)
    assert len({entry.sequence for entry in entries}) < len(entries)

    latest = inside[-1]  # placed after others of its batch: their placements shaped its choice
    assert isinstance(latest.event, ActorPlaced)
    actor_id, node_id = latest.event.actor_id, latest.event.node_id
    (logged,) = await client.history(actor_id=actor_id)
    assert (logged.type, logged.sequence, logged.index) == ("ActorPlaced", latest.sequence, latest.index)
    trace = await client.why_placed(actor_id)
    assert trace.reproduced and trace.node_id == node_id
    (record,) = await first_records(client, "actor", [actor_id])
    assert record is not None and record.event == latest.event


async def test_an_unreadable_event_inside_a_batch_is_skipped_alone_and_set_aside_with_its_index(
    client: Client, mesh: Mesh
) -> None:
    await client.register_node("bad-batch-node", {"CPU": 4})
    async with bus_of(mesh, "test-hostile-batch") as bus:
        good = b'{"type":"ActorRemoved","actor_id":"never-placed"}'  # of no epoch: every fold ignores it
        ack = await bus.js.publish(s.batch_subject(s.ACTOR), b"[" + good + b',{"type":"ActorPlaced","actor_id":7}]')

        async def set_aside() -> bool:
            try:
                letter = await bus.js.get_last_msg(s.DEAD_LETTERS_STREAM, s.event_dead_letter_subject("labels"))
            except nats.js.errors.NotFoundError:  # none yet
                return False
            headers = letter.headers or {}
            return headers.get(s.DEAD_LETTER_SEQUENCE) == str(ack.seq) and headers.get(s.DEAD_LETTER_INDEX) == "1"

        assert await holds_within(set_aside, 15)
    assert isinstance(await client.submit(ScheduleRequest("after-bad-batch", {"CPU": 1})), Placed)
    # the dead letter is stored before labels ends that message's fold: wait for the fold, not for the letter
    assert await holds_within(functools.partial(_folded_past, client, "labels", ack.seq), 15)


@pytest.mark.parametrize(
    ("what", "data"),
    [
        ("oversized", b'[{"type":"ActorRemoved","actor_id":"' + b"x" * 300_000 + b'"}]'),
        ("not an array", b'{"type":"ActorRemoved","actor_id":"never-placed-2"}'),
        ("random bytes", bytes(range(256)) * 4),
        ("too deep", b"[" * 5_000 + b"]" * 5_000),
    ],
)
async def test_a_hostile_batch_stops_no_reader_and_changes_no_view(
    client: Client, mesh: Mesh, what: str, data: bytes
) -> None:
    """What a batch is not (over the services' size limit, not an array, not JSON, nested too deep) is one
    unreadable entry to every reader: the services serve on and fold as a replay does, and the history, AGE and
    `why-placed` of an actor the log holds still answer."""
    await client.register_node(f"hostile-{what.replace(' ', '-')}", {"CPU": 4})
    actor_id = f"before-{what.replace(' ', '-')}"
    assert isinstance(await client.submit(ScheduleRequest(actor_id, {"CPU": 1})), Placed)
    async with bus_of(mesh, "test-hostile-batch") as bus:
        ack = await bus.js.publish(s.batch_subject(s.ACTOR), data)
    assert isinstance(await client.submit(ScheduleRequest(f"after-{actor_id}", {"CPU": 1})), Placed)
    for service in ("labels", "vclusters", "scheduler"):
        assert await holds_within(functools.partial(_folded_past, client, service, ack.seq), 15), service
    live, replayed = await digest_of_a_replay_at(mesh, client, "scheduler")
    assert live == replayed
    assert [logged.type for logged in await client.history(actor_id=actor_id)] == ["ActorPlaced"]
    (record,) = await first_records(client, "actor", [actor_id])
    assert record is not None and isinstance(record.event, ActorPlaced)
    assert (await client.why_placed(actor_id)).reproduced


async def _folded_past(client: Client, service: str, sequence: int) -> bool:
    return (await client.health(service)).sequence > sequence
