"""A resent request is decided once and answered the same; a duplicated event is stored and applied once."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator

import nats.js.errors
import pytest

from schemas import ActorPlaced, ActorSubmitted, NodeRegistered, Placed, ScheduleRequest
from schemas import subjects as s
from schemas.subjects import subject_of
from services.client import Client
from services.core.errors import ConflictError, NotFoundError, UnavailableError
from services.local.mesh import Mesh
from services.runtime.codec import encode
from tests.integration.conftest import holds_within, start_test_mesh
from tests.integration.log import read_events
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory, server_path: ServerPath) -> Iterator[Mesh]:
    """One mesh for this module's tests that each use their own ids and keys; a test that pauses the scheduler,
    deletes a bucket, or counts what every node holds has a mesh of its own (`fresh_mesh`)."""
    running = start_test_mesh(tmp_path_factory.mktemp("idempotency") / "mesh", server_path)
    try:
        yield running
    finally:
        running.close()


async def test_a_resent_request_is_decided_once_and_returns_the_same_decision(
    fresh_client: Client, fresh_mesh: Mesh
) -> None:
    """Submitting the same live actor id twice gives one decision and one submission in the log."""
    await fresh_client.register_node("n1", {"CPU": 2})
    await fresh_client.register_node("n2", {"CPU": 2})
    first = await fresh_client.submit(ScheduleRequest("a1", {"CPU": 1}))
    again = await fresh_client.submit(ScheduleRequest("a1", {"CPU": 1}))
    assert again == first
    events = await read_events(fresh_mesh.nats_url)
    assert [type(e).__name__ for e in events if getattr(e, "actor_id", "") == "a1"].count("ActorPlaced") == 1
    submissions = [e for e in events if isinstance(e, ActorSubmitted | ActorPlaced) and e.request is not None]
    assert len(submissions) == 1  # placed as submitted: one ActorPlaced carrying the request
    status = await fresh_client.status()
    assert sum(n.resources["CPU"] - n.available["CPU"] for n in status.nodes) == 1


async def test_a_duplicated_event_is_stored_once_and_applied_once(client: Client, mesh: Mesh) -> None:
    """The same event id published twice: JetStream keeps one copy and the node is registered once."""
    event = NodeRegistered(event_id="dup-1", node_id="n9", resources={"CPU": 1.0}, labels={"corral.io/node-id": "n9"})
    first = await client.bus.js.publish(subject_of(event), encode(event), headers={"Nats-Msg-Id": "dup-1"})
    second = await client.bus.js.publish(subject_of(event), encode(event), headers={"Nats-Msg-Id": "dup-1"})
    assert second.duplicate and second.seq == first.seq
    assert [n.node_id for n in await client.nodes() if n.node_id == "n9"] == ["n9"]
    events = await read_events(mesh.nats_url)
    assert len([e for e in events if isinstance(e, NodeRegistered) and e.node_id == "n9"]) == 1
    assert s.event_subject(s.NODE, "n9") == subject_of(event)


async def test_a_request_resent_with_its_key_gets_the_decision_its_first_sending_led_to(client: Client) -> None:
    """The first answer is lost (say, in an outage); the stream stores the resend as a duplicate and delivers
    nothing, yet the resend is answered with the decision, not left to time out."""
    await client.register_node("resent-n1", {"CPU": 2})
    request = ScheduleRequest("resent-a1", {"CPU": 1})
    first = await client.submit(request, command_id="submit-resent-a1")
    again = await client.submit(request, timeout=2.0, command_id="submit-resent-a1")
    assert again == first
    removed = await client.remove_actor("resent-a1", command_id="remove-resent-a1")
    resent = await client.remove_actor("resent-a1", command_id="remove-resent-a1")
    assert "removed" in removed.message
    assert "received before" in resent.message
    assert "resent-a1" not in await client.placements()


async def test_a_refusal_that_came_after_its_sender_gave_up_answers_the_resend(
    fresh_client: Client, fresh_mesh: Mesh
) -> None:
    """The scheduler refuses a request only after its sender stopped waiting (the scheduler was paused, as a leader
    caught in an outage is): the refusal goes to an inbox no one waits on, and the resend, a duplicate the stream
    stores and delivers no more, has no decision to find. It gets the refusal, not a timeout at every resend for
    the whole duplicate window (a chaos run reported such a submission lost: its virtual cluster was destroyed
    between its first delivery and the next)."""
    await fresh_client.register_node("n1", {"CPU": 2})
    request = ScheduleRequest("a1", {"CPU": 1}, vcluster_id="vc-gone")
    scheduler = fresh_mesh.processes["scheduler"]
    scheduler.send_signal(signal.SIGSTOP)  # briefly: well within its lease
    try:
        with pytest.raises(UnavailableError, match="no decision within"):
            await fresh_client.submit(request, timeout=1.0, command_id="submit-a1")
    finally:
        scheduler.send_signal(signal.SIGCONT)
    for _ in range(2):
        with pytest.raises(NotFoundError, match="no such virtual cluster"):
            await fresh_client.submit(request, timeout=5.0, command_id="submit-a1")
    assert "a1" not in await fresh_client.placements()


async def test_a_refusal_no_client_received_answers_another_clients_resend(
    fresh_client: Client, fresh_mesh: Mesh
) -> None:
    """The first sending's client goes away while the scheduler is paused; the scheduler, going on, refuses the
    request to an inbox no one listens on. Another client's resend, a duplicate the stream delivers no more, gets
    that refusal from the refusals bucket (the first client's memory of it is gone with it)."""
    await fresh_client.register_node("n1", {"CPU": 2})
    request = ScheduleRequest("a1", {"CPU": 1}, vcluster_id="vc-gone")
    scheduler = fresh_mesh.processes["scheduler"]
    scheduler.send_signal(signal.SIGSTOP)  # briefly: well within its lease
    try:
        async with Client(fresh_mesh.nats_url) as first:
            with pytest.raises(UnavailableError, match="no decision within"):
                await first.submit(request, timeout=1.0, command_id="submit-a1")
    finally:
        scheduler.send_signal(signal.SIGCONT)
    async with Client(fresh_mesh.nats_url) as other:
        with pytest.raises(NotFoundError, match="no such virtual cluster"):
            await other.submit(request, timeout=5.0, command_id="submit-a1")
    assert "a1" not in await fresh_client.placements()


async def test_a_refusal_is_kept_and_answered_after_the_refusals_bucket_was_deleted(fresh_client: Client) -> None:
    """An operator deletes the refusals bucket: the next keyed refusal makes it again and is answered (before, the
    scheduler retried its store forever, and stopped answering and acking)."""
    await fresh_client.register_node("n1", {"CPU": 2})
    await fresh_client.bus.js.delete_key_value(s.REFUSALS_BUCKET)
    request = ScheduleRequest("a1", {"CPU": 1}, vcluster_id="vc-gone")
    with pytest.raises(NotFoundError, match="no such virtual cluster"):
        await fresh_client.submit(request, timeout=10.0, command_id="submit-a1")
    bucket = await fresh_client.bus.js.key_value(s.REFUSALS_BUCKET)
    assert (await bucket.status()).values == 2  # the keyed request and its refusal
    assert isinstance(await fresh_client.submit(ScheduleRequest("a2", {"CPU": 1})), Placed)


async def test_a_key_resent_with_other_resources_is_a_conflict_naming_the_key_and_the_field(
    fresh_client: Client, fresh_mesh: Mesh
) -> None:
    """The same key with CPU 1 then CPU 3: the second is refused naming the key and how it differs (before, it was
    answered Placed, as the stored request with CPU 1 was); the log holds the first request alone."""
    await fresh_client.register_node("n1", {"CPU": 4})
    assert isinstance(await fresh_client.submit(ScheduleRequest("a1", {"CPU": 1}), command_id="k1"), Placed)
    with pytest.raises(ConflictError) as conflict:
        await fresh_client.submit(ScheduleRequest("a1", {"CPU": 3}), command_id="k1")
    assert str(conflict.value) == (
        "command_id 'k1': already used for a different request (resources: {'CPU': 1.0} then {'CPU': 3.0}); "
        "use a new key"
    )
    assert [n.available["CPU"] for n in (await fresh_client.status()).nodes] == [3.0]
    submitted = [
        e.request for e in await read_events(fresh_mesh.nats_url) if isinstance(e, ActorSubmitted | ActorPlaced)
    ]
    assert submitted == [ScheduleRequest("a1", {"CPU": 1.0})]


async def test_a_key_reused_for_another_actor_is_a_conflict_at_once(fresh_client: Client, fresh_mesh: Mesh) -> None:
    """A key reused for another actor, while its first request still waits in the work queue (the scheduler is
    paused, briefly) and once it is decided and acked: a `ConflictError` at once, not `UnavailableError` after the
    client's timeout (10 s here) while it waited for a decision about an actor nobody stored."""
    await fresh_client.register_node("n1", {"CPU": 4})
    scheduler = fresh_mesh.processes["scheduler"]
    scheduler.send_signal(signal.SIGSTOP)
    try:
        first = asyncio.create_task(
            fresh_client.submit(ScheduleRequest("a1", {"CPU": 1}), timeout=10.0, command_id="k1")
        )
        assert await holds_within(lambda: _queued(fresh_client, 1))
        await _conflicts_at_once(fresh_client, ScheduleRequest("a2", {"CPU": 1}))
    finally:
        scheduler.send_signal(signal.SIGCONT)
    assert isinstance(await first, Placed)
    assert await holds_within(lambda: _queued(fresh_client, 0))  # acked: the work queue no longer holds it
    await _conflicts_at_once(fresh_client, ScheduleRequest("a2", {"CPU": 1}))
    assert set(await fresh_client.placements()) == {"a1"}


async def _queued(client: Client, count: int) -> bool:
    return (await client.bus.js.stream_info(s.REQUESTS_STREAM)).state.messages == count


async def _conflicts_at_once(client: Client, request: ScheduleRequest) -> None:
    began = time.perf_counter()
    with pytest.raises(ConflictError, match=r"command_id 'k1': already used .*actor_id: 'a1' then 'a2'"):
        await client.submit(request, timeout=10.0, command_id="k1")
    took = time.perf_counter() - began
    print(f"conflict answered in {took * 1000:.1f} ms")
    assert took < 2.0


async def test_different_requests_sent_at_once_under_one_key_store_one_and_refuse_the_others(
    client: Client, mesh: Mesh
) -> None:
    """20 different requests sent at once under one key: exactly one is stored and answered with its decision,
    the 19 others get a `ConflictError` naming the key (before, they were answered as if stored, or timed out)."""
    await client.register_node("at-once-n1", {"CPU": 64})
    requests = [ScheduleRequest(f"at-once-a{index}", {"CPU": 1 + index % 3}) for index in range(20)]
    answers = await asyncio.gather(
        *(client.submit(request, timeout=10.0, command_id="at-once-k1") for request in requests),
        return_exceptions=True,
    )
    placed = [answer for answer in answers if isinstance(answer, Placed)]
    conflicts = [answer for answer in answers if isinstance(answer, ConflictError)]
    assert len(placed) == 1 and len(conflicts) == 19, answers
    assert all("command_id 'at-once-k1': already used for a different request" in str(c) for c in conflicts)
    ours = {request.actor_id for request in requests}
    submitted = [e.request for e in await read_events(mesh.nats_url) if isinstance(e, ActorSubmitted | ActorPlaced)]
    assert [r.actor_id for r in submitted if r is not None and r.actor_id in ours] == [placed[0].id]
    assert set(await client.placements()) & ours == {placed[0].id}


async def test_a_key_used_for_a_removal_then_a_submission_is_a_conflict(client: Client) -> None:
    """One key for two kinds of request: the second names the first's kind."""
    await client.register_node("kinds-n1", {"CPU": 4})
    await client.submit(ScheduleRequest("kinds-a1", {"CPU": 1}))
    await client.remove_actor("kinds-a1", command_id="kinds-k1")
    with pytest.raises(
        ConflictError, match="command_id 'kinds-k1': already used for a different request \\(a RemoveActor"
    ):
        await client.submit(ScheduleRequest("kinds-a1", {"CPU": 1}), command_id="kinds-k1")


async def test_a_request_sent_again_after_its_ack_was_lost_gets_its_decision(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream stored the request and its ack was lost (a busy machine answered past the client's wait): the
    client sends it again, the stream drops the copy as a duplicate, and the decision of the first sending (made
    and acked meanwhile) is the answer, not an error about a key nobody gave."""
    await client.register_node("lost-ack-n1", {"CPU": 2})
    publish = client.bus.js.publish
    sendings: list[bool] = []

    async def ack_lost_once(*args: object, **kwargs: object) -> object:
        ack = await publish(*args, **kwargs)  # type: ignore[arg-type]
        sendings.append(bool(ack.duplicate))
        if len(sendings) == 1:
            assert await holds_within(lambda: taken_off_the_queue(ack.seq), timeout=20), "never decided and acked"
            raise TimeoutError("the ack was lost")
        return ack

    async def taken_off_the_queue(sequence: int) -> bool:
        try:
            await client.bus.js.get_msg(s.REQUESTS_STREAM, sequence)
        except nats.js.errors.NotFoundError:
            return True  # the work queue drops a request once the scheduler acked it
        return False

    monkeypatch.setattr(client.bus.js, "publish", ack_lost_once)
    decision = await client.submit(ScheduleRequest("lost-ack-a1", {"CPU": 1}), timeout=20)
    assert sendings == [False, True], "sent twice, stored once"
    assert isinstance(decision, Placed) and decision.node_id == "lost-ack-n1"


async def test_a_request_set_aside_at_each_of_two_deliveries_is_one_dead_letter(client: Client) -> None:
    """A poison request whose terminate came after its ack wait is delivered again, and set aside again."""
    sequence = time.time_ns()  # no request of the shared mesh's log has it
    data = f"poison {sequence}"
    for request in (sequence, sequence, sequence + 1):  # two deliveries of one request, then another request
        await client.bus.dead_letter("scheduler", data.encode(), "unreadable", s.SCHEDULE, request=request)
    letters = [letter for letter in await client.dead_letters("scheduler", limit=10_000) if letter.data == data]
    assert len(letters) == 2, letters
