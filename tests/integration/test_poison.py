"""Poison on every subject a service reads: each service refuses it or sets it aside, and the mesh goes on.

Deep nesting, invalid UTF-8, an oversized payload, wrong types, an unknown field, bytes that are not JSON, and
events that decode but cannot be folded, published once to every event, request, command, query and heartbeat
subject. Afterwards every service is alive and answers, the mesh places new work, restarted services replay the
log (the poison stays in it) to the same views, and the dead letters list what was set aside.
"""

from __future__ import annotations

import asyncio

import nats.errors
import pytest

from schemas import Placed, ScheduleRequest
from schemas import subjects as s
from schemas.queries import DigestQuery, DigestReply
from schemas.replies import Rejected
from services.client import Client
from services.local.mesh import AUTOSCALER, SERVICES, Mesh
from services.runtime.codec import decode, encode
from services.runtime.connection import sent
from tests.integration.autoscaling import write_config
from tests.integration.conftest import wait_ready

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

POISON = {
    "deep": b'{"a":' * 1000 + b"1" + b"}" * 1000,
    "deep array": b"[" * 5000,
    "invalid UTF-8 value": b'{"type": "NodeRegistered", "node_id": "\xed\xb3\xbf", "resources": {}}',
    "invalid UTF-8 first": b'{"node_id": "\xed\xb3\xbf", "actor_id": "\xed\xb3\xbf", "vc_id": "\xed\xb3\xbf"}',
    "oversize": b'{"node_id": "' + b"x" * 300_000 + b'"}',
    "wrong type": b'{"type": "NodeRegistered", "node_id": 5, "resources": {"CPU": "many"}}',
    "unknown field": b'{"type": "NodeDied", "node_id": "n1", "bogus": 1}',
    "negative amount": b'{"type": "NodeRegistered", "node_id": "neg", "resources": {"CPU": -4}}',
    "not JSON": b"\x00garbage{",
}
"""Payloads no service may act on, and none may die of."""

UNFOLDABLE = {
    s.event_subject(s.ACTOR, "ghost"): b'{"type": "ActorPlaced", "actor_id": "ghost", "node_id": "nowhere"}',
    s.event_subject(s.PLACEMENT_GROUP, "ghost"): b'{"type": "PlacementGroupPlaced", "pg_id": "ghost", '
    b'"bundle_nodes": ["nowhere"]}',
    s.event_subject(s.NODE, "ghost"): b'{"type": "NodeDied", "node_id": "ghost"}',
    s.event_subject(s.TAINT, "ghost"): b'{"type": "TaintsChanged", "node_id": "ghost", "taints": []}',
    s.event_subject(s.VNODE, "ghost"): b'{"type": "VirtualClusterDestroyed", "vc_id": "ghost"}',
}
"""Events that decode but name what does not exist."""

EVENT_SUBJECTS = [
    *(s.event_subject(aggregate, "x") for aggregate in (s.NODE, s.TAINT, s.ACTOR, s.PLACEMENT_GROUP, s.VCLUSTER)),
    s.event_subject(s.VNODE, "x"),
    s.ELECTIONS,
    s.AUTOSCALER_DECISIONS,
]
POISONED = (*SERVICES, AUTOSCALER)
"""Every service, the autoscaler too."""
REQUEST_SUBJECTS = [
    v
    for v in vars(s).values()
    if isinstance(v, str) and v.startswith(f"{s.PREFIX}.req.") and "*" not in v and ">" not in v
]
ASKED_SUBJECTS = [
    *(v for v in vars(s).values() if isinstance(v, str) and v.startswith((f"{s.PREFIX}.cmd.", f"{s.PREFIX}.q."))),
    *(s.digest_subject(service) for service in POISONED),
]
"""Commands and queries: request/reply, each poison answered with a rejection."""

FOLLOWED = {"taints": s.aggregate_subjects(s.NODE, s.TAINT)}
"""The subjects a service folds, when not all of them."""
DIGESTED = ("labels", "taints", "vclusters")
"""Services whose digest a restart (a full replay) must give again (the scheduler and the autoscaler append an
election)."""


async def digest(client: Client, service: str) -> DigestReply:
    reply = await client.bus.nc.request(s.digest_subject(service), encode(DigestQuery()), timeout=5)
    answer: DigestReply = decode(reply.data, DigestReply)
    return answer


async def caught_up_digests(client: Client) -> dict[str, DigestReply]:
    """Each digested service's digest once it has folded the whole log."""
    found: dict[str, DigestReply] = {}
    async with asyncio.timeout(10):
        for service in DIGESTED:
            last = await client.bus.last_sequence(subjects=FOLLOWED.get(service, ()))
            while (reply := await digest(client, service)).sequence < last:
                await asyncio.sleep(0.05)
            found[service] = reply
    return found


async def poison_everything(client: Client) -> list[Rejected]:
    """Publish every poison to every subject; the rejections the request/reply subjects answered."""
    nc, js = client.bus.nc, client.bus.js
    for subject in EVENT_SUBJECTS:
        for payload in POISON.values():
            await js.publish(subject, payload)
    for subject, payload in UNFOLDABLE.items():
        await js.publish(subject, payload)
    for subject in REQUEST_SUBJECTS:
        for payload in POISON.values():
            await js.publish(subject, payload)
    for payload in POISON.values():
        await nc.publish(s.heartbeat_subject("n1"), payload)
    rejections = []
    for subject in ASKED_SUBJECTS:
        for name, payload in POISON.items():
            try:
                reply = await nc.request(subject, payload, timeout=5)
            except (nats.errors.NoRespondersError, nats.errors.TimeoutError) as error:
                raise AssertionError(f"no answer to {name} on {subject}: did the service die?") from error
            answer = decode(reply.data, Rejected)
            assert answer.error, f"{name} on {subject}: empty rejection"
            rejections.append(answer)
    return rejections


async def test_poison_on_every_subject_stops_no_service_and_views_replay_the_same(client: Client, mesh: Mesh) -> None:
    mesh.settings["CORRAL_AUTOSCALER_CONFIG"] = str(write_config(mesh.data_dir))
    mesh.start_service(AUTOSCALER)
    await client.wait_autoscaler(timeout=15)
    await client.register_node("n1", {"CPU": 4})
    assert isinstance(await client.submit(ScheduleRequest("before", {"CPU": 1})), Placed)

    rejections = await poison_everything(client)
    assert any("nest deeper than the 48-level limit" in r.error for r in rejections)
    assert any("not valid UTF-8" in r.error for r in rejections)
    assert any("over the" in r.error and "limit" in r.error for r in rejections)

    inbox = client.bus.nc.new_inbox()
    answers = await client.bus.nc.subscribe(inbox, max_msgs=1)
    await client.bus.js.publish(s.SCHEDULE, POISON["deep"], headers={s.REPLY_HEADER: inbox})
    refused = decode((await answers.next_msg(timeout=10)).data, Rejected)
    assert "nest deeper" in refused.error

    assert isinstance(await client.submit(ScheduleRequest("after", {"CPU": 1})), Placed)
    assert all(process.poll() is None for process in mesh.processes.values()), "a service died"
    await client.wait_ready(timeout=10)
    assert set(await client.placements()) == {"before", "after"}
    assert [node.node_id for node in await client.nodes()] == ["n1"]

    async with asyncio.timeout(10):  # every poisoned request was terminated: none waits for redelivery
        while (await client.bus.js.stream_info(s.REQUESTS_STREAM)).state.messages:
            await asyncio.sleep(0.05)

    live = await caught_up_digests(client)
    assert all(reply.skipped > 0 for reply in live.values())
    letters = await client.dead_letters(limit=10_000)
    event_letters = {(letter.service, letter.sequence) for letter in letters if letter.sequence}
    assert {service for service, _ in event_letters} == set(POISONED)
    assert (
        sum(letter.service == "scheduler" and not letter.sequence for letter in letters)
        == len(REQUEST_SUBJECTS) * len(POISON) + 1
    )

    for service in DIGESTED:  # a full replay, through the poison still in the log
        mesh.stop_service(service, hard=True)
        mesh.start_service(service)
    await wait_ready(client)
    replayed = await caught_up_digests(client)
    assert {k: r.digest for k, r in replayed.items()} == {k: r.digest for k, r in live.items()}
    assert {k: r.skipped for k, r in replayed.items()} == {k: r.skipped for k, r in live.items()}
    mesh.stop_service("scheduler", hard=True)  # which then appends an election of its own
    mesh.start_service("scheduler")
    assert isinstance(await client.submit(ScheduleRequest("restarted", {"CPU": 1}), timeout=15), Placed)
    again = await client.dead_letters(limit=10_000)
    assert {(letter.service, letter.sequence) for letter in again if letter.sequence} == event_letters
    assert len([letter for letter in again if letter.sequence]) == len(event_letters), "dead-lettered twice"


async def test_a_reply_subject_in_the_event_log_is_never_answered(client: Client) -> None:
    """A heartbeat of an unknown node and a query whose reply subject names the event log (or the JetStream API):
    the services answer neither there, so nothing lands in the log; both still serve."""
    await client.register_node("n1", {"CPU": 1})
    before = (await client.bus.js.stream_info(s.EVENTS_STREAM)).state.last_seq
    heartbeat = b'{"node_id": "nobody"}'
    for reply in ("corral.evt.node.forged", "$JS.API.STREAM.DELETE.CORRAL_EVENTS"):
        await client.bus.nc.publish(s.HEARTBEATS, heartbeat, reply=reply)
        await client.bus.nc.publish(s.NODES_QUERY, b"{}", reply=reply)
    await sent(client.bus.nc)
    assert [node.node_id for node in await client.nodes()] == ["n1"]  # answered after the hostile messages
    assert (await client.bus.js.stream_info(s.EVENTS_STREAM)).state.last_seq == before
