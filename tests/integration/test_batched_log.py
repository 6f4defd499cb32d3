"""The scheduler appends what it decided for a batch of requests as batch messages (`subjects.batch_subject`): the
log holds fewer messages than events, every reader folds each event, and what looks an event up by its own subject
(history, `why-placed`, AGE) still finds the events inside a batch."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import nats.js.errors
import pytest

from schemas import ActorPlaced, Placed, ScheduleRequest
from schemas import subjects as s
from services.cli.records import first_records
from services.client import Client
from services.local.mesh import Mesh
from tests.integration.conftest import bus_of, holds_within, start_test_mesh
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
        good = b'{"type":"ActorRemoved","actor_id":"never-placed","epoch":1}'
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
    assert (await client.health("labels")).sequence > ack.seq
