"""An event of the log that cannot be folded is skipped whole by every fold: no half of it survives in any view."""

from __future__ import annotations

import asyncio

import pytest

from schemas import ActorPlaced, Placed, SchedulerElected, ScheduleRequest
from schemas import subjects as s
from services.client import Client
from services.local.mesh import Mesh
from services.runtime.codec import encode

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_a_placement_on_an_unknown_node_leaves_no_phantom_actor_after_a_scheduler_restart(
    client: Client, mesh: Mesh
) -> None:
    """The forged placement carries its request: folding it half-way used to submit the actor, and the next
    leader then placed that phantom on a real node."""
    await client.register_node("n1", {"CPU": 4})
    assert isinstance(await client.submit(ScheduleRequest("before", {"CPU": 1})), Placed)
    log = await client.bus.read_to(await client.bus.last_sequence())
    epoch = max(event.epoch for event in log if isinstance(event, SchedulerElected))
    forged = ActorPlaced(
        actor_id="phantom", node_id="nowhere", request=ScheduleRequest("phantom", {"CPU": 1}), epoch=epoch
    )
    await client.bus.js.publish(s.event_subject(s.ACTOR, "phantom"), encode(forged))

    mesh.stop_service("scheduler", hard=True)  # the next leader replays the forged event as a follower
    mesh.start_service("scheduler")
    assert isinstance(await client.submit(ScheduleRequest("after", {"CPU": 1}), timeout=15), Placed)
    await client.register_node("n2", {"CPU": 4})  # a new node re-tries everything that waits

    subject = s.event_subject(s.ACTOR, "phantom")
    async with asyncio.timeout(10):  # the new scheduler sets the forged event aside once it replayed it
        while not (letters := [x for x in await client.dead_letters("scheduler") if x.subject == subject]):
            await asyncio.sleep(0.05)
    await client.wait_ready(timeout=10)
    assert set(await client.placements()) == {"before", "after"}
    status = await client.status()
    assert "phantom" not in {actor.actor_id for actor in status.actors}
    assert "phantom" not in {pending.id for pending in status.pending}
    assert "ActorPlaced" in letters[0].reason and "node_id 'nowhere': not a node" in letters[0].reason
