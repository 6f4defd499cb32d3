"""Requests sent in batches (`corral.req.batch`): one message and one reply for many, each request decided in its
order as it would be alone, answered only once every decision of the batch is in the log, none applied twice."""

from __future__ import annotations

import uuid

import msgspec
import pytest

from schemas import Pending, Placed, SchedulerElected, ScheduleRequest
from schemas import subjects as s
from schemas.commands import MAX_BATCH, RemoveActor, RequestBatch, SchedulerRequest, SubmitActor
from schemas.replies import Accepted, BatchReply, Rejected
from services.client import Client
from services.core.state import replay
from services.local.mesh import Mesh
from services.runtime.codec import decode
from tests.integration.batches import sent_raw
from tests.integration.conftest import log_of, wait_ready
from tests.integration.log import read_events, read_sequenced
from tests.integration.test_restart_and_snapshots import digest_of_a_replay_at

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_a_batch_is_decided_in_order_answered_together_and_stored_once(client: Client, mesh: Mesh) -> None:
    """Ten one-CPU actors on eight CPUs, a bad selector and a removal in one batch: the answers come in the
    requests' order (decided in that order: eight placed, the ninth and tenth pending, the removal after them), the
    refused one named with its rule, the removal accepted; every placement is in the log; sending the same submits
    again answers the same decisions and writes nothing."""
    await client.register_node("n0", {"CPU": 4})
    await client.register_node("n1", {"CPU": 4})
    submits = [ScheduleRequest(f"b{i}", {"CPU": 1}) for i in range(10)]
    bad = ScheduleRequest("bad", {"CPU": 1}, label_selector={"zone": "in()"})
    answers = await client.send_batch(
        [*(SubmitActor(request=request) for request in submits), SubmitActor(request=bad), RemoveActor(actor_id="b0")]
    )
    assert [type(answer) for answer in answers] == [Placed] * 8 + [Pending] * 2 + [Rejected, Accepted]
    assert [answer.id for answer in answers[:10] if isinstance(answer, Placed | Pending)] == [
        f"b{i}" for i in range(10)
    ]
    refused = answers[10]
    assert isinstance(refused, Rejected) and "zone" in refused.error
    placed = {answer.id: answer.node_id for answer in answers if isinstance(answer, Placed)}
    in_log = replay(await read_events(mesh.nats_url))
    assert {actor_id: in_log.actors[actor_id].node_id for actor_id in placed if actor_id != "b0"} == {
        actor_id: node for actor_id, node in placed.items() if actor_id != "b0"
    }
    assert "b0" not in in_log.actors
    events_before = len(await read_events(mesh.nats_url))
    again = await client.submit_many(submits[1:8])
    assert again == answers[1:8]
    assert len(await read_events(mesh.nats_url)) == events_before
    removed = await client.remove_many([f"b{i}" for i in range(1, 10)])
    assert all(isinstance(answer, Accepted) for answer in removed), removed
    assert sum(node.available["CPU"] for node in (await client.status()).nodes) == 8
    live, replayed = await digest_of_a_replay_at(mesh, client, "scheduler")
    assert live == replayed


async def test_a_batch_the_scheduler_cannot_read_is_refused_whole_naming_the_rule(client: Client) -> None:
    """A keyed request inside a batch, an empty batch, one over the limit and a batch sent with an idempotency key
    header are refused whole, the field and the rule named, and nothing is decided."""
    await client.register_node("n0", {"CPU": 4})
    keyed = {"kind": "batch", "requests": [{"kind": "schedule", "request": {"actor_id": "k1"}, "command_id": "x"}]}
    too_many = {"kind": "batch", "requests": [{"kind": "remove_actor", "actor_id": "z"}] * (MAX_BATCH + 1)}
    for body, words in (
        (keyed, "requests[0].command_id 'x'"),
        ({"kind": "batch", "requests": []}, "length >= 1 - at `$.requests`"),
        (too_many, f"length <= {MAX_BATCH} - at `$.requests`"),
    ):
        reply = await sent_raw(client, msgspec.json.encode(body))
        assert isinstance(reply, Rejected) and words in reply.error, reply
    keyed_batch = msgspec.json.encode(RequestBatch(requests=[SubmitActor(request=ScheduleRequest("k2", {"CPU": 1}))]))
    reply = await sent_raw(client, keyed_batch, headers={s.KEY_HEADER: "my-key"})
    assert isinstance(reply, Rejected), reply
    assert f"header {s.KEY_HEADER} 'my-key': a batch carries no idempotency key" in reply.error
    assert (await client.status()).nodes[0].available["CPU"] == 4
    with pytest.raises(ValueError, match="command_id"):
        RequestBatch(requests=[RemoveActor(actor_id="a", command_id="key")])


async def test_a_resent_batch_is_stored_once_and_a_restart_loses_none_of_it(
    fresh_client: Client, fresh_mesh: Mesh
) -> None:
    """The same batch message twice (a client resending after a lost ack) is stored once: one answer, one set of
    decisions; after a restart of the scheduler every placement answered is still there."""
    client, mesh = fresh_client, fresh_mesh
    await client.register_node("n0", {"CPU": 100})
    batch = RequestBatch(requests=[SubmitActor(request=ScheduleRequest(f"r{i}", {"CPU": 1})) for i in range(50)])
    key = uuid.uuid4().hex
    first = await sent_raw(client, msgspec.json.encode(batch), key)
    assert isinstance(first, BatchReply) and all(isinstance(reply, Placed) for reply in first.replies)
    ack = await client.bus.js.publish(s.BATCH, msgspec.json.encode(batch), headers={"Nats-Msg-Id": key})
    assert ack.duplicate
    mesh.stop_service("scheduler")
    mesh.start_service("scheduler")
    await wait_ready(client)
    placements = await client.placements()
    assert set(placements) == {f"r{i}" for i in range(50)}
    assert sum(1 for _ in replay(await read_events(mesh.nats_url)).actors) == 50


async def test_a_thousand_requests_over_the_message_size_go_as_several_batches_and_all_are_answered(
    client: Client,
) -> None:
    """1,000 submits of about 670 bytes each pass the services' 256 KiB message limit together: the client sends
    them as consecutive batches under it, and every one is answered, in order."""
    await client.register_node("big", {"CPU": 2_000})
    labels = {f"note{key}": "x" * 60 for key in range(5)}
    requests = [ScheduleRequest(f"s{index:04d}", {"CPU": 1}, labels=labels) for index in range(1_000)]
    assert sum(len(msgspec.json.encode(request)) for request in requests) > client.settings.max_message_bytes
    answers = await client.submit_many(requests, timeout=60.0)
    placed = [answer.id for answer in answers if isinstance(answer, Placed)]
    assert placed == [request.actor_id for request in requests], [a for a in answers if not isinstance(a, Placed)][:3]


@pytest.mark.scale
async def test_a_backlog_of_big_batches_is_decided_in_parts_and_the_leader_keeps_its_lease(
    fresh_client: Client, fresh_mesh: Mesh
) -> None:
    """100 batch messages of 600 submits (60,000 requests over 50 nodes) wait when the scheduler starts, and one
    fetch takes them all: it decides them in parts, appending between, so the event loop renews its 1.5 s lease
    throughout. The same process answers every batch, in parts, under the one election it won at its start."""
    client, mesh = fresh_client, fresh_mesh
    for index in range(50):
        await client.register_node(f"h{index:02d}", {"CPU": 2_000})
    mesh.stop_service("scheduler")
    inbox = client.bus.nc.new_inbox()
    sub = await client.bus.nc.subscribe(f"{inbox}.*")
    for number in range(100):
        requests: list[SchedulerRequest] = [
            SubmitActor(request=ScheduleRequest(f"g{number}-{index}", {"CPU": 1})) for index in range(600)
        ]
        headers = {s.REPLY_HEADER: f"{inbox}.{number}", "Nats-Msg-Id": uuid.uuid4().hex}
        await client.bus.js.publish(s.BATCH, msgspec.json.encode(RequestBatch(requests=requests)), headers=headers)
    restarted_after = await client.bus.last_sequence()
    scheduler = mesh.start_service("scheduler")
    answers: dict[str, BatchReply | Rejected] = {}
    while len(answers) < 100:
        msg = await sub.next_msg(timeout=180.0)
        answers[msg.subject] = decode(msg.data, BatchReply | Rejected)
    assert scheduler.poll() is None, log_of(mesh, "scheduler")[-3000:]
    logged = await read_sequenced(mesh.nats_url)
    elections = [e for seq, e in logged if seq > restarted_after and isinstance(e, SchedulerElected)]
    assert len(elections) == 1, elections
    batches = [answer for answer in answers.values() if isinstance(answer, BatchReply)]
    assert len(batches) == 100, [answer for answer in answers.values() if isinstance(answer, Rejected)][:2]
    assert sum(isinstance(reply, Placed) for answer in batches for reply in answer.replies) == 60_000
