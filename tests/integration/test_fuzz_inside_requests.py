"""Hostile scheduling requests into an admitted flexible virtual cluster and its child: the path that decides a new
actor before it joins its cluster's view and reads the lent room from plain fields. Well-formed requests are placed
or wait, spoiled ones are refused or set aside; after them every service runs, work is still placed inside both
clusters, every live digest equals a replay of the log, and once every actor is removed the root's nodes are as
free as before (no room lent and never given back)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadtest.digests import check_digests
from schemas import Placed, ScheduleRequest, VirtualCluster
from schemas import subjects as s
from services.client import Client, NotFoundError
from services.local.mesh import SERVICES
from tests.integration.conftest import start_test_mesh
from tests.integration.fuzzing import Fuzzer, fuzzing
from tests.integration.payloads import Payload, Target, dumps, spoil, struct
from tests.integration.probe import on_one_mesh
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.integration, pytest.mark.fuzz]

EXAMPLES = int(os.environ.get("CORRAL_FUZZ_EXAMPLES", "200"))
CLUSTERS = ("team", "squad")
NODES = {f"in-n{index}": {"CPU": 4.0, "memory": 8.0} for index in range(3)}
ACTORS = ("i0", "i1", "i2", "i3")
request = st.fixed_dictionaries(
    {
        "actor_id": st.sampled_from(ACTORS),
        "resources": st.sampled_from([{"CPU": 0.5}, {"CPU": 1.0, "memory": 1.0}, {"CPU": 3.0}, {"GPU": 1.0}]),
        "vcluster_id": st.sampled_from(CLUSTERS),
    },
    optional={"label_selector": st.just({"tier": "web"})},
)
schedule = struct("kind", "schedule", request=request)
payloads = st.one_of(
    schedule.map(lambda message: Payload("well-formed", "schedule", dumps(message))), schedule.flatmap(spoil)
)
SCHEDULE = Target(s.SCHEDULE, "request", s.SCHEDULE)
UNHEARD_NODES_LIVE = {"CORRAL_HEARTBEAT_TIMEOUT": "3600", "CORRAL_NODE_GRACE": "3600"}
"""The nodes send no heartbeats: they must outlive the run (a node's death is not what this test is about)."""


@pytest.fixture(scope="module")
def fuzzer(tmp_path_factory: pytest.TempPathFactory, server_path: ServerPath) -> Iterator[Fuzzer]:
    """A mesh with three nodes, a flexible cluster (`team`) and a flexible child of it (`squad`)."""
    folder = Path(tmp_path_factory.mktemp("fuzz-inside")) / "mesh"
    mesh = start_test_mesh(folder, server_path, SERVICES, UNHEARD_NODES_LIVE)
    with fuzzing(mesh, lambda started: _set_up(started.nats_url)) as fuzzer:
        yield fuzzer


async def _set_up(nats_url: str) -> None:
    async with Client(nats_url, timeout=10.0) as client:
        await client.wait_ready(timeout=30.0)
        for node_id, resources in NODES.items():
            await client.register_node(node_id, resources)
        flexible = VirtualCluster(flexible_resource_min={"CPU": 1.0}, flexible_resource_max={"CPU": 6.0, "memory": 6.0})
        await client.create_virtual_cluster("team", flexible)
        child = VirtualCluster(flexible_resource_max={"CPU": 3.0, "memory": 3.0})
        await client.create_virtual_cluster("squad", child, parent="team")


async def _free(client: Client) -> dict[str, dict[str, float]]:
    return {node.node_id: dict(node.available) for node in await client.nodes() if node.node_id in NODES}


async def _after(nats_url: str, before: dict[str, dict[str, float]]) -> list[str]:
    """What is wrong once the hostile requests are in and their actors removed (what they placed may hold a cluster
    at its maximum): work not placed inside either cluster, or room lent and never given back once every actor is
    removed."""
    problems = []
    async with Client(nats_url, timeout=10.0) as client:
        await _remove_every_actor(client, ACTORS)
        checks = [f"check-{vc_id}" for vc_id in CLUSTERS]
        for actor_id, vc_id in zip(checks, CLUSTERS, strict=True):
            decision = await client.submit(ScheduleRequest(actor_id, {"CPU": 0.5}, vcluster_id=vc_id))
            if not isinstance(decision, Placed):
                problems.append(f"a new actor inside {vc_id} was not placed once the others left: {decision}")
        await _remove_every_actor(client, checks)
        after = await _free(client)
        if after != before:
            problems.append(f"root nodes' free room before {before}, after every actor left {after}")
    return problems


async def _remove_every_actor(client: Client, actor_ids: Iterable[str]) -> None:
    """Remove `actor_ids` (a pending one leaves too) and whatever else is placed inside the clusters."""
    placed = [actor_id for vc_id in CLUSTERS for actor_id in await client.placements(vc_id)]
    for actor_id in {*placed, *actor_ids}:
        with contextlib.suppress(NotFoundError):
            await client.remove_actor(actor_id)


def test_hostile_requests_inside_a_flexible_cluster_and_its_child(fuzzer: Fuzzer) -> None:
    """Every payload to the schedule subject, inside `team` or `squad`; then alive, placing, replayable, no leak."""

    async def free_now() -> dict[str, dict[str, float]]:
        async with Client(fuzzer.mesh.nats_url, timeout=10.0) as client:
            return await _free(client)

    before = fuzzer.runner.run(free_now())

    @on_one_mesh(EXAMPLES)
    @given(payloads)
    def one_request(payload: Payload) -> None:
        fuzzer.send(SCHEDULE, payload)
        fuzzer.assert_alive(f"after request {fuzzer.sent}")

    one_request()
    fuzzer.assert_alive(f"after {fuzzer.sent} requests")
    problems = fuzzer.runner.run(_after(fuzzer.mesh.nats_url, before))
    checks = fuzzer.runner.run(check_digests(fuzzer.settings, fuzzer.bus, SERVICES, timeout=20.0))
    problems += [f"{check.service}: live digest != replay ({check.detail})" for check in checks if not check.equal]
    assert not problems, f"after {fuzzer.sent} requests: " + "; ".join(problems)
