"""kubectl's habits through the `corral` entry point against a real mesh: `get KIND NAME...`, `delete KIND NAME...`
and `delete KIND -l SELECTOR`, `events --pg`, a removal of what is not there said as kubectl's NotFound (exit 1),
and flag errors with the subcommand's usage and a "did you mean"."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas import NodeDied, PlacementGroupRequest, ScheduleRequest
from services.client import Client
from services.local.mesh import Mesh
from tests.integration.conftest import corral, start_test_mesh
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory, server_path: ServerPath) -> Iterator[Mesh]:
    """One mesh for this module's tests (each uses its own ids); the test that reads the cluster's totals has a
    mesh of its own (`fresh_mesh`)."""
    running = start_test_mesh(tmp_path_factory.mktemp("cli-habits") / "mesh", server_path)
    try:
        yield running
    finally:
        running.close()


async def test_get_and_delete_take_names_and_selectors_as_kubectl_does(mesh: Mesh, client: Client) -> None:
    await client.register_node("get-n1", {"CPU": 8}, {"disk": "ssd"})
    await client.register_node("get-n2", {"CPU": 8})
    await client.register_node("get-n4", {"CPU": 1})
    for index in range(5):
        await client.submit(ScheduleRequest(f"load-{index}", {"CPU": 1}, labels={"run": "locust"}))
    await client.submit(ScheduleRequest("keep", {"CPU": 1}, labels={"run": "other"}))
    await client.create_placement_group(PlacementGroupRequest("pg1", [{"CPU": 1}]))

    named = await corral(mesh, "get", "nodes", "get-n2", "get-n1", "-o", "json")
    assert named.returncode == 0, named.stderr
    assert [node["node_id"] for node in json.loads(named.stdout)] == ["get-n2", "get-n1"]
    partly = await corral(mesh, "get", "nodes", "get-n1", "get-n9")
    assert partly.returncode == 1 and partly.stdout.splitlines()[1].split()[0] == "get-n1"
    assert partly.stderr.strip() == 'Error from server (NotFound): nodes "get-n9" not found'

    swept = await corral(mesh, "delete", "actors", "-l", "run=locust")
    assert swept.returncode == 0, swept.stderr
    assert sorted(swept.stdout.splitlines()) == [f"actor/load-{i} deleted (actor load-{i} removed)" for i in range(5)]
    ours = {f"load-{i}" for i in range(5)} | {"keep"}
    assert sorted(set(await client.placements()) & ours) == ["keep"]

    # (this test's client heartbeats get-n4: it comes back)
    node = await corral(mesh, "delete", "node", "get-n4", "get-n9")
    assert (node.returncode, node.stdout.split()[0]) == (1, "node/get-n4")
    assert node.stderr.splitlines() == ['Error from server (NotFound): nodes "get-n9" not found']
    assert any(
        isinstance(logged.event, NodeDied) and logged.event.removed for logged in await client.history(node_id="get-n4")
    )
    assert (await corral(mesh, "delete", "pg", "pg1")).stdout == "pg/pg1 deleted (placement group pg1 removed)\n"

    events = await corral(mesh, "events", "--pg", "pg1")
    assert events.returncode == 0, events.stderr
    types = [line.split()[2] for line in events.stdout.splitlines()[1:]]
    assert types == ["PlacementGroupSubmitted", "PlacementGroupPlaced", "PlacementGroupRemoved"]


async def test_removing_what_is_not_there_is_not_found_with_exit_1(mesh: Mesh, client: Client) -> None:
    await client.register_node("absent-n1", {"CPU": 2}, {"disk": "ssd"})
    for argv, said in [
        (("label", "node", "absent-n1", "nosuch-"), "label 'nosuch' not found on node absent-n1"),
        (("taint", "node", "absent-n1", "nosuch-"), "taint 'nosuch' not found on node absent-n1"),
        (("delete", "actor", "ghost"), 'actors "ghost" not found'),
        (("delete", "vc", "ghost"), 'vcs "ghost" not found'),
    ]:
        done = await corral(mesh, *argv)
        assert (done.returncode, done.stdout) == (1, ""), (argv, done.stdout, done.stderr)
        assert done.stderr.strip() == f"Error from server (NotFound): {said}"
    (node,) = [found for found in await client.nodes() if found.node_id == "absent-n1"]
    assert node.labels["disk"] == "ssd"


async def test_flag_errors_show_the_subcommands_usage_and_the_closest_flag(mesh: Mesh, client: Client) -> None:
    await client.register_node("flag-n1", {"CPU": 2}, {"disk": "ssd"})
    typo = await corral(mesh, "get", "nodes", "--selecter", "disk=ssd")
    assert typo.returncode == 2
    assert typo.stderr.startswith("usage: corral get ")
    assert typo.stderr.rstrip().endswith("unrecognized arguments: --selecter disk=ssd; did you mean --selector?")

    late = await corral(mesh, "label", "node", "flag-n1", "--overwrite", "disk-")  # words after a flag count
    assert (late.returncode, late.stdout) == (0, "node/flag-n1 labeled\n"), late.stderr
    (node,) = [found for found in await client.nodes() if found.node_id == "flag-n1"]
    assert "disk" not in node.labels


async def test_quantities_read_one_way_in_tables_totals_and_events(fresh_mesh: Mesh, fresh_client: Client) -> None:
    await fresh_client.register_node("big", {"CPU": 1796, "memory": 32 * 2**30})
    await fresh_client.submit(ScheduleRequest("odd", {"CPU": 1, "memory": 4 * 2**30 + 1}))

    listed = await corral(fresh_mesh, "get", "nodes")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1].split()[3:5] == ["1/1796", "4Gi/32Gi"]  # not 4.29497e+09, not 1.796k
    assert "Resources (used/total): CPU 1/1796, memory 4Gi/32Gi" in listed.stdout
    described = await corral(fresh_mesh, "describe", "node", "big")
    assert "e+" not in described.stdout and "32Gi" in described.stdout

    events = await corral(fresh_mesh, "events", "--node", "big")
    assert "node big joined with CPU=1796, memory=32Gi" in events.stdout  # not memory=3.43597e+10
    assert "e+" not in events.stdout


EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
"""The request files the README points to: each one must be taken by the command its first line names."""


async def test_every_example_request_file_is_taken_by_the_cli(mesh: Mesh, client: Client) -> None:
    await client.register_node("examples-n1", {"CPU": 8, "memory": 16 * 2**30}, {"disk": "ssd"})
    await client.register_node("examples-n2", {"CPU": 8, "memory": 16 * 2**30})
    files = sorted(EXAMPLES.glob("*.yaml"))
    assert [path.name for path in files] == ["actor.yaml", "pg.yaml", "vc.yaml"]
    commands = {"actor.yaml": ["submit"], "pg.yaml": ["create", "pg"], "vc.yaml": ["vc", "create", "team-a"]}
    for path in files:
        assert path.read_text().startswith(f"# corral {' '.join(commands[path.name])} -f docs/examples/{path.name}")
        done = await corral(mesh, *commands[path.name], "-f", str(path))
        assert done.returncode == 0, (path.name, done.stdout, done.stderr)
        assert "placed" in done.stdout or "admitted" in done.stdout, (path.name, done.stdout)


async def test_submit_f_with_a_list_sends_one_batch_and_says_each_outcome(
    mesh: Mesh, client: Client, tmp_path: Path
) -> None:
    """`corral submit -f many.yaml`, as `kubectl apply -f` takes many documents: one line per actor in the file's
    order, a refused one on stderr naming its rule, and exit 1 because one was refused."""
    await client.register_node("many-n1", {"CPU": 2}, {"pool": "many"}, {"pool": "many"})  # tainted: ours alone
    wanted = "  resources: {CPU: 1}\n  label_selector: {pool: many}\n  tolerations: {pool: many}\n"
    path = tmp_path / "many.yaml"
    path.write_text(
        "".join(f"- actor_id: many-{index}\n{wanted}" for index in range(3)) + "- actor_id: many-bad\n"
        "  label_selector: {zone: 'in()'}\n"
    )
    done = await corral(mesh, "submit", "-f", str(path))
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stdout.splitlines()
    assert lines[:2] == ["many-0 placed on many-n1", "many-1 placed on many-n1"], done.stdout
    assert lines[2].startswith("many-2 pending: ") and len(lines) == 3, done.stdout
    assert "many-bad refused: " in done.stderr and "zone" in done.stderr, done.stderr
    assert (await client.placements()).keys() >= {"many-0", "many-1"}
