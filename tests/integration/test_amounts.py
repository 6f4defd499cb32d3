"""Impossible amounts and unknown fields are refused at every entry (client, CLI, bus), naming field, value and
rule, and change nothing; what the services set aside is listed by `corral dead-letters`."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from schemas import FixedSizeNode, FixedSizeNodes, PlacementGroupRequest, ScheduleRequest, VirtualCluster
from schemas import subjects as s
from schemas.replies import Rejected
from services.cli.__main__ import main
from services.client import Client, RejectedError, SyncClient
from services.local.mesh import Mesh
from services.runtime.codec import decode
from tests.integration.conftest import LASTING_NODES, start_test_mesh
from tests.support.servers import ServerPath

pytestmark = pytest.mark.integration

NAN, INF = math.nan, math.inf


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory, server_path: ServerPath) -> Iterator[Mesh]:
    """One mesh for this module's tests (each uses its own ids, and none is ever placed); the dead-letters test
    counts what every service set aside, on a mesh of its own (`fresh_mesh`). Its nodes outlive the late heartbeats
    of a busy machine (`LASTING_NODES`): a node taken for unreachable would change what the tests say is unchanged."""
    running = start_test_mesh(tmp_path_factory.mktemp("amounts") / "mesh", server_path, settings=LASTING_NODES)
    try:
        yield running
    finally:
        running.close()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("call", "says"),
    [
        pytest.param(
            lambda c: c.submit(ScheduleRequest("a1", {"CPU": NAN})), "request.resources['CPU'] nan", id="submit-nan"
        ),
        pytest.param(
            lambda c: c.submit(ScheduleRequest("a1", {"CPU": INF})), "request.resources['CPU'] inf", id="submit-inf"
        ),
        pytest.param(lambda c: c.register_node("n2", {"CPU": INF}), "resources['CPU'] inf", id="node-inf"),
        pytest.param(
            lambda c: c.create_placement_group(PlacementGroupRequest("g1", [{"CPU": 1}, {"GPU": -1}])),
            "request.bundles[1]['GPU'] -1",
            id="group-negative",
        ),
        pytest.param(
            lambda c: c.create_virtual_cluster("v1", VirtualCluster(flexible_resource_max={"CPU": INF})),
            "spec.flexible_resource_max['CPU'] inf",
            id="vcluster-max-inf",
        ),
        pytest.param(
            lambda c: c.create_virtual_cluster(
                "v1", VirtualCluster(fixed_size_nodes=[FixedSizeNodes([FixedSizeNode({"CPU": NAN})])])
            ),
            "spec.fixed_size_nodes[0].nodes[0].resources['CPU'] nan",
            id="vcluster-node-nan",
        ),
    ],
)
async def test_the_client_refuses_an_amount_that_is_not_finite_or_negative(
    client: Client, call: Callable[[Client], Awaitable[object]], says: str, request: pytest.FixtureRequest
) -> None:
    room = f"n1-{request.node.callspec.id}"  # a node of this test's own on the module's mesh
    await client.register_node(room, {"CPU": 4})
    with pytest.raises(RejectedError) as refused:
        await call(client)
    assert str(refused.value) == f"{says}: must be a finite number >= 0"
    assert "a1" not in await client.placements()
    assert "g1" not in await client.placement_groups()
    assert {node.node_id for node in await client.nodes()} & {room, "n2"} == {room}
    assert "v1" not in {vc.cluster_id for vc in await client.virtual_clusters()}


@pytest.mark.anyio
async def test_the_bus_refuses_amounts_out_of_range_naming_the_resource(client: Client) -> None:
    for amount, says in ((b"1e999", "out of range"), (b"-2", "resources['GPU'] -2: must be a finite number >= 0")):
        data = b'{"node_id": "bus-n1", "resources": {"CPU": 1, "GPU": ' + amount + b"}}"
        reply = await client.bus.nc.request(s.REGISTER_NODE, data, timeout=5)
        assert says in decode(reply.data, Rejected).error
    assert "bus-n1" not in {node.node_id for node in await client.nodes()}


@pytest.fixture
def sync(mesh: Mesh) -> Iterator[SyncClient]:
    """A node of the test's own with room, through a blocking client, once the mesh answers."""
    with room_client(mesh, f"room-{next(ROOMS)}") as client:
        yield client


ROOMS = itertools.count()
"""Numbers the nodes of `sync`: each test's own on the module's mesh."""


@contextlib.contextmanager
def room_client(mesh: Mesh, node_id: str) -> Iterator[SyncClient]:
    """A blocking client of the mesh once it answers, with a node of `node_id` with room."""
    with SyncClient(mesh.nats_url, timeout=10.0) as client:
        client.wait_ready(timeout=15.0)
        client.register_node(node_id, {"CPU": 4})
        yield client


def corral(argv: list[str], mesh: Mesh) -> int:
    """`corral argv` against the mesh; its exit status (argparse's usage errors included)."""
    try:
        return main([*argv, "--nats-url", mesh.nats_url])
    except SystemExit as exited:
        return int(exited.code or 0)


@pytest.mark.parametrize("amount", ["nan", "inf", "-1"])
def test_corral_submit_refuses_a_cpu_amount_that_is_not_finite_or_negative(
    amount: str, mesh: Mesh, sync: SyncClient, capsys: pytest.CaptureFixture[str]
) -> None:
    assert corral(["submit", "a1", f"--cpu={amount}"], mesh) == 2
    assert f"argument --cpu: amount '{amount}': must be a number >= 0" in capsys.readouterr().err
    assert "a1" not in sync.placements()


def test_a_request_file_with_an_unknown_field_is_refused_naming_it(
    tmp_path: Path, mesh: Mesh, sync: SyncClient, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"actor_id": "a1", "resourcez": {"CPU": 1}}))
    assert corral(["submit", "-f", str(path)], mesh) == 1
    assert f"-f {path}: not a ScheduleRequest: Object contains unknown field `resourcez`" in capsys.readouterr().err
    path.write_text('{"actor_id": "a1", "resources": {"CPU": 1e999}}')
    assert corral(["submit", "-f", str(path)], mesh) == 1
    assert "out of range" in capsys.readouterr().err
    assert "a1" not in sync.placements()


def test_corral_dead_letters_lists_what_each_service_set_aside(
    fresh_mesh: Mesh, capsys: pytest.CaptureFixture[str]
) -> None:
    with room_client(fresh_mesh, "n1") as sync:
        assert corral(["dead-letters"], fresh_mesh) == 0
        assert capsys.readouterr().out == "no dead letters\n"
        publish = sync._client.bus.js.publish  # raw bytes, as a buggy or hostile publisher sends them
        sync._run(publish(s.event_subject(s.NODE, "x"), b'{"a":' * 100 + b"}" * 100))
        sync._run(publish(s.SCHEDULE, b"\x00garbage"))
        sync.register_node("n2", {"CPU": 1})  # folded after the poison by labels; the others fold it meanwhile
        letters: list[dict[str, object]] = []
        deadline = time.monotonic() + 10
        while len(letters) < 5 and time.monotonic() < deadline:
            assert corral(["dead-letters", "-o", "json"], fresh_mesh) == 0
            letters = json.loads(capsys.readouterr().out)
        assert sorted((letter["service"], letter["subject"]) for letter in letters) == [
            ("labels", "corral.evt.node.x"),
            ("scheduler", "corral.evt.node.x"),
            ("scheduler", "corral.req.schedule"),
            ("taints", "corral.evt.node.x"),
            ("vclusters", "corral.evt.node.x"),
        ]
        assert corral(["dead-letters", "--service", "scheduler"], fresh_mesh) == 0
        table = capsys.readouterr().out.splitlines()
        assert table[0].split() == ["TIME", "SERVICE", "SUBJECT", "SEQUENCE", "REASON"]
        assert len(table) == 3 and all(" scheduler " in row for row in table[1:])
        assert any("corral.req.schedule  -" in row and "not valid JSON" in row for row in table[1:])
        assert any("corral.evt.node.x" in row and "nest deeper" in row for row in table[1:])
