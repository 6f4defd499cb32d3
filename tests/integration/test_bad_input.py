"""Malformed, oversized or invalid messages get a clear rejection (or a dead letter) and change nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from schemas import Placed, PlacementGroupRequest, ScheduleRequest
from schemas import subjects as s
from schemas.replies import Rejected
from services.client import Client, NotFoundError, RejectedError
from services.local.mesh import Mesh
from services.runtime.codec import decode
from tests.integration.conftest import holds_within, start_test_mesh
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory, server_path: ServerPath) -> Iterator[Mesh]:
    """One mesh for the tests of refused commands (each uses its own node id); the tests that count dead letters or
    spread a group over every node have a mesh of their own (`fresh_mesh`)."""
    running = start_test_mesh(tmp_path_factory.mktemp("bad-input") / "mesh", server_path)
    try:
        yield running
    finally:
        running.close()


async def ask(client: Client, subject: str, data: bytes) -> Rejected:
    """Send raw bytes to a command subject and read the rejection."""
    reply = await client.bus.nc.request(subject, data, timeout=5)
    answer: Rejected = decode(reply.data, Rejected)
    return answer


async def test_malformed_and_oversized_commands_are_rejected_and_the_service_keeps_serving(client: Client) -> None:
    """Not JSON, a wrong type and 2 MB of payload: each refused with the reason; then registration works."""
    not_json = await ask(client, s.REGISTER_NODE, b"{not json")
    assert "not valid JSON" in not_json.error
    wrong_type = await ask(client, s.REGISTER_NODE, b'{"node_id": "malformed-n1", "resources": {"CPU": "many"}}')
    assert "RegisterNode" in wrong_type.error and "$.resources" in wrong_type.error
    huge = await ask(client, s.ADD_TAINTS, b'{"taints": [], "node_id": "' + b"x" * 300_000 + b'"}')
    assert "limit" in huge.error or "payload" in huge.error
    await client.register_node("malformed-n1", {"CPU": 1})
    assert [n.node_id for n in await client.nodes() if n.node_id == "malformed-n1"] == ["malformed-n1"]


async def test_invalid_commands_name_the_field_the_value_and_the_rule(client: Client) -> None:
    """Bad labels, negative resources, unknown nodes: a ValueError subclass, and nothing changes."""
    with pytest.raises(RejectedError, match="resources\\['CPU'\\]"):
        await client.register_node("invalid-n1", {"CPU": -1})
    with pytest.raises(ValueError, match="bad key!"):
        await client.register_node("invalid-n1", {"CPU": 1}, labels={"bad key!": "x"})
    with pytest.raises(NotFoundError, match="no such node"):
        await client.add_taints("ghost", {"gpu": "true"})
    invalid = b'{"node_id": "invalid-n1", "taints": [{"key": "k", "effect": "Never"}]}'
    bad_effect = await ask(client, s.ADD_TAINTS, invalid)
    assert "effect" in bad_effect.error and "Never" in bad_effect.error
    assert "invalid-n1" not in {n.node_id for n in await client.nodes()}


async def test_an_invalid_scheduling_request_is_rejected_and_dead_lettered(
    fresh_client: Client, fresh_mesh: Mesh
) -> None:
    """A request that breaks a rule is refused with the reason; garbage on the request stream is kept aside."""
    await fresh_client.register_node("n1", {"CPU": 1})
    with pytest.raises(RejectedError, match="resources"):
        await fresh_client.submit(ScheduleRequest("a1", {"CPU": -5}))
    await fresh_client.bus.js.publish(s.SCHEDULE, b"\x00garbage")
    decision = await fresh_client.submit(ScheduleRequest("a2", {"CPU": 1}))
    assert decision.id == "a2"
    info = await fresh_client.bus.js.stream_info(s.DEAD_LETTERS_STREAM)
    assert info.state.messages >= 1
    assert "a1" not in await fresh_client.placements()


async def test_an_unreadable_event_goes_to_dead_letters_and_services_keep_serving(fresh_client: Client) -> None:
    """Garbage appended to the log is set aside by every service; later events still apply."""
    await fresh_client.bus.js.publish(s.event_subject(s.NODE, "junk"), b"[1, 2, 3]")
    await fresh_client.register_node("n1", {"CPU": 1})
    assert [n.node_id for n in await fresh_client.nodes()] == ["n1"]
    assert [n.node_id for n in (await fresh_client.status()).nodes] == ["n1"]
    services_setting_aside = {"labels", "taints", "vclusters", "scheduler"}

    async def set_aside_by_all() -> bool:
        return await dead_letter_senders(fresh_client) >= services_setting_aside

    assert await holds_within(set_aside_by_all, timeout=10), await dead_letter_senders(fresh_client)


async def dead_letter_senders(client: Client) -> set[str]:
    """The services that set a message aside, as the dead letters say."""
    info = await client.bus.js.stream_info(s.DEAD_LETTERS_STREAM)
    senders = set()
    for sequence in range(info.state.first_seq, info.state.last_seq + 1):
        letter = await client.bus.js.get_msg(s.DEAD_LETTERS_STREAM, sequence)
        senders.add((letter.subject or "").split(".")[2])  # corral.dlq.<service>[.events]
    return senders


async def test_a_placement_group_past_the_bundle_limit_is_refused_and_the_largest_accepted_is_placed(
    fresh_client: Client,
) -> None:
    """1,001 bundles: refused, naming the field, the count and the limit, and nothing recorded; 1,000 bundles (the
    most accepted) spread over the nodes in one decision, and the scheduler goes on answering."""
    for index in range(4):
        await fresh_client.register_node(f"n{index}", {"CPU": 300})
    too_many = PlacementGroupRequest("too-many", [{"CPU": 1}] * 1_001, "SPREAD")
    with pytest.raises(RejectedError, match=r"bundles '1,001 bundles': must have at most 1,000 bundles"):
        await fresh_client.create_placement_group(too_many)
    assert "too-many" not in await fresh_client.placement_groups()
    largest = await fresh_client.create_placement_group(
        PlacementGroupRequest("largest", [{"CPU": 1}] * 1_000, "SPREAD")
    )
    assert isinstance(largest, Placed) and set(largest.bundle_nodes) == {"n0", "n1", "n2", "n3"}
    assert isinstance(await fresh_client.submit(ScheduleRequest("after", {"CPU": 1})), Placed)
