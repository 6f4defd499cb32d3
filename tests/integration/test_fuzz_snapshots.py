"""Fuzz suite for the snapshot store: a hostile record under one service's Redis key, then that service restarted.

One mesh for the module, with nodes, a taint, placed and pending actors and a virtual cluster. Each example
stops one service (it saves its snapshot), writes a record bent from the real ones (see `records.py`) in its
place, starts the service again, and checks: the process runs and answers, its live digest equals a replay of
the log at the same sequence, every placement decided before stands, and a new actor is still placed.

`make test` restarts CORRAL_FUZZ_SNAPSHOTS (default 12) times, about half a second each; `make fuzz` 300.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hypothesis import example, given

from loadtest.digests import check_digest, live_digest
from schemas import ScheduleRequest
from schemas.vclusters import VirtualCluster
from services.client import Client
from services.local.mesh import AUTOSCALER, Mesh
from services.local.mesh import SERVICES as MESH_SERVICES
from services.runtime.bus import Bus
from services.runtime.settings import Settings
from services.runtime.snapshots import SnapshotStore
from tests.integration.conftest import log_of, start_test_mesh
from tests.integration.probe import does_not_place, on_one_mesh
from tests.integration.records import SERVICES, Recipe, Record, recipes
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.integration, pytest.mark.fuzz]

EXAMPLES = int(os.environ.get("CORRAL_FUZZ_SNAPSHOTS", "12"))
PATIENCE_S = 20.0
"""How long a restarted service may take to answer again (a bound: one that never does is the finding)."""


KEEPS_ONE_NODE = (
    "provider: {type: local}\nnode_types: {mem: {resources: {MEMORY: 1}, min_workers: 1, max_workers: 1}}\n"
)
"""The autoscaler's node types in this mesh: it keeps one node that holds no CPU, so it changes no decision."""


class Restarts:
    """One mesh and one connection on one event loop, shared by every example; the real records and the
    placements decided before any hostile record was written."""

    def __init__(self, mesh: Mesh, runner: asyncio.Runner) -> None:
        self.mesh, self.runner = mesh, runner
        self.settings = Settings.from_env(mesh.env)
        self.bus: Bus = runner.run(Bus.connect(self.settings, "snapshot-fuzzer"))
        self.redis = redis.Redis.from_url(self.settings.redis_url)
        self.real: dict[str, Record] = {}
        self.decided: dict[str, str] = {}
        self.restarts = 0

    def record_real_snapshots(self) -> None:
        """Restart each service once so that it saves its snapshot, and keep the records."""
        for service in SERVICES:
            self.mesh.stop_service(service)
            found: dict[bytes, bytes] = self.redis.hgetall(SnapshotStore.key(service))  # type: ignore[assignment]
            self.real[service] = {key.decode(): value for key, value in found.items()}
            assert self.real[service].get("blob"), f"{service} saved no snapshot at stop"
            self.mesh.start_service(service)
            self.runner.run(self._answers(service))

    def restart_over(self, recipe: Recipe) -> None:
        """Stop the service (it saves its snapshot), put the hostile record in its place, start it again."""
        service, key = recipe.service, SnapshotStore.key(recipe.service)
        self.mesh.stop_service(service)
        self.redis.delete(key)
        if recipe.redis_type == "hash":
            self.redis.hset(key, mapping=recipe.record(self.real))  # type: ignore[arg-type]
        elif recipe.redis_type == "string":
            self.redis.set(key, self.real[service]["blob"])
        elif recipe.redis_type == "list":
            self.redis.rpush(key, self.real[service]["sequence"], self.real[service]["blob"])
        else:
            self.redis.sadd(key, self.real[service]["blob"])
        self.mesh.start_service(service)
        self.restarts += 1
        self.runner.run(self._answers(service))

    async def _answers(self, service: str) -> None:
        deadline = time.monotonic() + PATIENCE_S
        while await live_digest(self.bus, service, timeout=0.5) is None:
            process = self.mesh.processes[service]
            if process.poll() is not None or time.monotonic() > deadline:
                state = f"exited {process.returncode}" if process.poll() is not None else "does not answer"
                pytest.fail(f"{service} {state}:\n{log_of(self.mesh, service)[-3000:]}", pytrace=False)
            await asyncio.sleep(0.05)

    def problems(self, service: str) -> list[str]:
        """What is wrong with the mesh after `service` restarted: its digest, decisions, placing."""
        check = self.runner.run(check_digest(self.settings, self.bus, service, timeout=15.0))
        found = [] if check.equal else [f"{service}: live digest != replay ({check.detail})"]
        placements = self.runner.run(_placements(self.mesh))
        changed = {
            actor: (node, placements.get(actor))
            for actor, node in self.decided.items()
            if placements.get(actor) != node
        }
        if changed:
            found.append(f"placements changed (actor: before, now): {changed}")
        if problem := self.runner.run(does_not_place(self.mesh)):
            found.append(problem)
        return found


async def _placements(mesh: Mesh) -> dict[str, str]:
    """The placements, once every service serves (a restarted scheduler answers its digest before its queries)."""
    async with Client(mesh.nats_url, timeout=10.0) as client:
        await client.wait_ready()
        return await client.placements()


async def _build_state(mesh: Mesh) -> dict[str, str]:
    """Nodes (one tainted), placed and pending actors, a virtual cluster with work; the placements decided."""
    async with Client(mesh.nats_url, timeout=10.0) as client:
        await client.wait_ready(timeout=30.0)
        await client.register_node("n1", {"CPU": 8}, labels={"disk": "ssd"}, zone="z1")
        await client.register_node("n2", {"CPU": 8}, zone="z2")
        await client.add_taints("n2", {"gpu": "true"})
        for index in range(4):
            await client.submit(ScheduleRequest(f"a{index}", {"CPU": 1}, labels={"app": "web"}))
        await client.submit(ScheduleRequest("too-big", {"CPU": 64}))
        spec = VirtualCluster(flexible_resource_min={"CPU": 2}, flexible_resource_max={"CPU": 2})
        await client.create_virtual_cluster("vc1", spec, timeout=20.0)
        await client.submit(ScheduleRequest("vc1-a0", {"CPU": 1}, vcluster_id="vc1"), timeout=20.0)
        await client.remove_actor("a0")
        return await client.placements()


@pytest.fixture(scope="module")
def restarts(tmp_path_factory: pytest.TempPathFactory, server_path: ServerPath) -> Iterator[Restarts]:
    """A mesh with some state, its real snapshot records, and a connection to it."""
    # The setup's nodes must outlive its client's heartbeats: a node declared dead would move what was decided.
    folder = Path(tmp_path_factory.mktemp("fuzz-snapshots"))
    config = folder / "autoscaler.yaml"  # one launched node (min_workers) that no work can use: launches in view
    config.write_text(KEEPS_ONE_NODE, encoding="utf-8")
    patient = {"CORRAL_HEARTBEAT_TIMEOUT": "3600", "CORRAL_AUTOSCALER_CONFIG": str(config)}
    mesh = start_test_mesh(folder / "mesh", server_path, (*MESH_SERVICES, AUTOSCALER), settings=patient)
    try:
        with asyncio.Runner() as runner:
            decided = runner.run(_build_state(mesh))
            fuzzing = Restarts(mesh, runner)
            try:
                fuzzing.decided = decided
                fuzzing.record_real_snapshots()
                yield fuzzing
            finally:
                fuzzing.redis.close()
                runner.run(fuzzing.bus.close())
    finally:
        mesh.close()


def test_a_hostile_snapshot_record_neither_stops_a_service_nor_changes_its_view(restarts: Restarts) -> None:
    """Each example: one service restarted over a hostile record; alive, equal to a replay, decisions kept."""
    assert restarts.decided, "the setup placed nothing"

    @on_one_mesh(EXAMPLES)
    @given(recipes)
    @example(Recipe("taints", blob=("other", "labels")))
    @example(Recipe("labels", blob=("flipped", 0.6, 0)))
    @example(Recipe("scheduler", redis_type="string"))
    @example(Recipe("vclusters", fields=(("sequence", "٣"),)))
    @example(Recipe("labels", fields=(("sequence", "²"),)))
    @example(Recipe("autoscaler", blob=("flipped", 0.3, 1)))
    def one_restart(recipe: Recipe) -> None:
        restarts.restart_over(recipe)
        problems = restarts.problems(recipe.service)
        assert not problems, f"after {recipe}: " + "; ".join(problems)

    one_restart()
    print(f"{restarts.restarts} restarts over hostile records")
