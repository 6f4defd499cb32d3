"""Impossible amounts and unknown fields are refused at every entry (client, CLI, bus), naming field, value and
rule, and change nothing; what the services set aside is listed by `corral dead-letters`."""

from __future__ import annotations

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

pytestmark = pytest.mark.integration

NAN, INF = math.nan, math.inf


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("call", "says"),
    [
        (lambda c: c.submit(ScheduleRequest("a1", {"CPU": NAN})), "request.resources['CPU'] nan"),
        (lambda c: c.submit(ScheduleRequest("a1", {"CPU": INF})), "request.resources['CPU'] inf"),
        (lambda c: c.register_node("n2", {"CPU": INF}), "resources['CPU'] inf"),
        (
            lambda c: c.create_placement_group(PlacementGroupRequest("g1", [{"CPU": 1}, {"GPU": -1}])),
            "request.bundles[1]['GPU'] -1",
        ),
        (
            lambda c: c.create_virtual_cluster("v1", VirtualCluster(flexible_resource_max={"CPU": INF})),
            "spec.flexible_resource_max['CPU'] inf",
        ),
        (
            lambda c: c.create_virtual_cluster(
                "v1", VirtualCluster(fixed_size_nodes=[FixedSizeNodes([FixedSizeNode({"CPU": NAN})])])
            ),
            "spec.fixed_size_nodes[0].nodes[0].resources['CPU'] nan",
        ),
    ],
)
async def test_the_client_refuses_an_amount_that_is_not_finite_or_negative(
    client: Client, call: Callable[[Client], Awaitable[object]], says: str
) -> None:
    await client.register_node("n1", {"CPU": 4})
    with pytest.raises(RejectedError) as refused:
        await call(client)
    assert str(refused.value) == f"{says}: must be a finite number >= 0"
    assert await client.placements() == {}
    assert [node.node_id for node in await client.nodes()] == ["n1"]
    assert await client.virtual_clusters() == []


@pytest.mark.anyio
async def test_the_bus_refuses_amounts_out_of_range_naming_the_resource(client: Client) -> None:
    for amount, says in ((b"1e999", "out of range"), (b"-2", "resources['GPU'] -2: must be a finite number >= 0")):
        data = b'{"node_id": "n1", "resources": {"CPU": 1, "GPU": ' + amount + b"}}"
        reply = await client.bus.nc.request(s.REGISTER_NODE, data, timeout=5)
        assert says in decode(reply.data, Rejected).error
    assert await client.nodes() == []


@pytest.fixture
def sync(mesh: Mesh) -> Iterator[SyncClient]:
    """A node with room, through a blocking client, once the mesh answers."""
    with SyncClient(mesh.nats_url, timeout=10.0) as client:
        client.wait_ready(timeout=15.0)
        client.register_node("n1", {"CPU": 4})
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
    assert sync.placements() == {}


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
    assert sync.placements() == {}


def test_corral_dead_letters_lists_what_each_service_set_aside(
    mesh: Mesh, sync: SyncClient, capsys: pytest.CaptureFixture[str]
) -> None:
    assert corral(["dead-letters"], mesh) == 0
    assert capsys.readouterr().out == "no dead letters\n"
    publish = sync._client.bus.js.publish  # raw bytes, as a buggy or hostile publisher sends them
    sync._run(publish(s.event_subject(s.NODE, "x"), b'{"a":' * 100 + b"}" * 100))
    sync._run(publish(s.SCHEDULE, b"\x00garbage"))
    sync.register_node("n2", {"CPU": 1})  # folded after the poison by labels; the others fold it meanwhile
    letters: list[dict[str, object]] = []
    deadline = time.monotonic() + 10
    while len(letters) < 5 and time.monotonic() < deadline:
        assert corral(["dead-letters", "-o", "json"], mesh) == 0
        letters = json.loads(capsys.readouterr().out)
    assert sorted((letter["service"], letter["subject"]) for letter in letters) == [
        ("labels", "corral.evt.node.x"),
        ("scheduler", "corral.evt.node.x"),
        ("scheduler", "corral.req.schedule"),
        ("taints", "corral.evt.node.x"),
        ("vclusters", "corral.evt.node.x"),
    ]
    assert corral(["dead-letters", "--service", "scheduler"], mesh) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["TIME", "SERVICE", "SUBJECT", "SEQUENCE", "REASON"]
    assert len(table) == 3 and all(" scheduler " in row for row in table[1:])
    assert any("corral.req.schedule  -" in row and "not valid JSON" in row for row in table[1:])
    assert any("corral.evt.node.x" in row and "nest deeper" in row for row in table[1:])
