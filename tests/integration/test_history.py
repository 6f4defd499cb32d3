"""History from the log against a real mesh: `why --at` on the replayed log answers byte for byte as the live
scheduler did, `why-placed` re-runs a placement to the top-scored node, `events` filters and follows."""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import pytest

from schemas import Pending, Placed, ScheduleRequest, Taint, VirtualCluster
from services.cli.commands.status import render_why
from services.cli.history import history_lines
from services.client import Client, NotFoundError, RejectedError, SyncClient
from services.client.history import LoggedEvent
from services.local.mesh import Mesh
from services.runtime.codec import decode, encode
from services.runtime.snapshots import SnapshotStore
from tests.cli.test_commands import run
from tests.integration.conftest import holds_within, start_test_mesh, wait_ready
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


@pytest.fixture
def snapshotting(tmp_path: Path, server_path: ServerPath, monkeypatch: pytest.MonkeyPatch) -> Iterator[Mesh]:
    """A mesh whose services snapshot every 4 events, and clients that read its Redis."""
    running = start_test_mesh(tmp_path / "mesh", server_path, settings={"CORRAL_SNAPSHOT_EVERY": "4"})
    monkeypatch.setenv("CORRAL_REDIS_URL", running.env["CORRAL_REDIS_URL"])
    try:
        yield running
    finally:
        running.close()


@pytest.fixture
async def live(snapshotting: Mesh) -> AsyncIterator[Client]:
    """A client of the snapshotting mesh, once every service answers."""
    async with Client(snapshotting.nats_url, timeout=10.0) as connected:
        await wait_ready(connected)
        yield connected


async def cli(argv: list[str], mesh: Mesh, capsys: pytest.CaptureFixture[str], status: int = 0) -> str:
    """`corral argv` run in a thread (it runs its own event loop), as `tests.cli.test_commands.run`."""
    return await asyncio.to_thread(run, argv, mesh, capsys, status)


async def settled_why(client: Client, actor_id: str) -> tuple[int, bytes]:
    """The live explanation of an actor and the log sequence it was given at (the log did not move meanwhile)."""
    while True:
        before = await client.bus.last_sequence()
        answer = encode(await client.why(actor_id))
        if await client.bus.last_sequence() == before:
            return before, answer


async def test_why_at_a_past_sequence_answers_as_the_live_scheduler_did(
    live: Client, snapshotting: Mesh, capsys: pytest.CaptureFixture[str]
) -> None:
    client = live
    recorded: list[tuple[int, str, bytes]] = []

    async def remember(*actor_ids: str) -> None:
        for actor_id in actor_ids:
            sequence, answer = await settled_why(client, actor_id)
            recorded.append((sequence, actor_id, answer))

    await client.register_node("n0", {"CPU": 2})
    await client.register_node("n1", {"CPU": 2}, {"disk": "ssd"})
    await client.submit(ScheduleRequest("a", {"CPU": 2}, label_selector={"disk": "in(ssd)"}))
    await client.submit(ScheduleRequest("b", {"CPU": 2}))
    await client.submit(ScheduleRequest("c", {"CPU": 2}))
    await remember("a", "b", "c")
    await client.submit(ScheduleRequest("d", {"CPU": 1}, label_selector={"disk": "in(ssd)"}, tolerations={}))
    await client.register_node("n2", {"CPU": 1})
    await client.add_taints("n2", [Taint("gpu", "yes")])
    await remember("c", "d")
    await client.remove_actor("a")
    assert await holds_within(lambda: placed(client, "c"))
    await remember("c", "d")
    await client.remove_actor("c")  # on n1, where a was: d can have its place
    assert await holds_within(lambda: placed(client, "d"))
    await remember("d")

    stored = await SnapshotStore(snapshotting.env["CORRAL_REDIS_URL"]).load("scheduler")
    assert stored is not None and int(stored.sequence) <= recorded[-1][0]  # the later asks start from it
    for sequence, actor_id, answer in recorded:
        assert encode(await client.why(actor_id, at=sequence)) == answer, (sequence, actor_id)
        shown = await cli(["why", actor_id, "--at", str(sequence)], snapshotting, capsys)
        then = render_why(decode(answer, Placed | Pending), actor_id, "actor")
        assert shown == f"{then}\n(as of log sequence {sequence})\n"

    with pytest.raises(NotFoundError, match="at sequence 1"):
        await client.why("c", at=1)
    with pytest.raises(RejectedError, match="past the log's end"):
        await client.why("c", at=recorded[-1][0] + 1000)


async def placed(client: Client, actor_id: str) -> bool:
    return actor_id in await client.placements()


async def test_why_placed_re_runs_the_placement_to_the_top_scored_feasible_node(
    live: Client, snapshotting: Mesh, capsys: pytest.CaptureFixture[str]
) -> None:
    client = live
    for index in range(4):
        await client.register_node(f"n{index}", {"CPU": 8})
    await client.add_taints("n3", [Taint("maintenance", "yes")])
    await client.submit(ScheduleRequest("quarter", {"CPU": 2}, label_selector={"corral.io/node-id": "in(n0)"}))
    await client.submit(ScheduleRequest("most", {"CPU": 6}, label_selector={"corral.io/node-id": "in(n2)"}))
    decision = await client.submit(ScheduleRequest("x", {"CPU": 1}))

    trace = await client.why_placed("x")
    assert isinstance(decision, Placed) and decision.node_id == "n0"  # the most used below half
    assert trace.reproduced and trace.node_id == "n0"
    (option,) = trace.options
    assert option.chosen == "n0" and option.scored[0].node_id == "n0"
    assert option.scored[0].policy_rank < option.scored[1].policy_rank
    taints = next(step for step in option.filters if step.plugin == "TaintFilter")
    assert (taints.reached, taints.passed) == (4, 3)

    shown = await cli(["why-placed", "x"], snapshotting, capsys)
    assert shown.startswith("Actor x was placed on n0.\n")
    assert "Chosen: n0, the top-scored feasible node." in shown
    assert "TaintFilter    4        3       1" in shown
    refused = await cli(["why-placed", "nobody"], snapshotting, capsys, status=1)
    assert "the log holds no placement of it" in refused


async def test_events_filter_by_actor_node_and_cluster_and_tell_the_story(
    live: Client, snapshotting: Mesh, capsys: pytest.CaptureFixture[str]
) -> None:
    client = live
    await client.register_node("n0", {"CPU": 1})
    await client.submit(ScheduleRequest("web", {"CPU": 1}, max_restarts=1))
    await client.submit(ScheduleRequest("job", {"CPU": 1}))
    await client.register_node("n7", {"CPU": 1})
    assert await holds_within(lambda: placed(client, "job"))
    await client.report_actor_failed("job")
    await client.remove_node("n0")
    assert await holds_within(lambda: on_node(client, "web", "n7"))  # n7 is free again: web restarts there

    story = [line.split("  ", 1)[1] for line in history_lines(await client.history(actor_id="job"))]
    assert story[0] == "submitted"
    assert story[1].startswith("pending: 0/1 nodes are available: 1 node(s) Insufficient CPU")
    assert story[2:] == ["placed on n7 after n7 was added", "failed with n7 (reported failed), for good"]
    web = [line.split("  ", 1)[1] for line in history_lines(await client.history(actor_id="web"))]
    assert web[0] == "submitted and placed on n0"
    assert web[1:] == ["failed with n0 (node n0 died)", "restarted on n7 after n0 died"]

    table = (await cli(["events", "--node", "n7"], snapshotting, capsys)).splitlines()
    assert table[0].split() == ["SEQ", "TIME", "TYPE", "MEANING"]
    types = [line.split()[2] for line in table[1:]]
    assert types == ["NodeRegistered", "ActorPlaced", "ActorFailed", "ActorPlaced"]
    both = (await cli(["events", "--node", "n0", "--actor", "web", "-o", "json"], snapshotting, capsys)).splitlines()
    assert [line.split('"type":"')[1].split('"')[0] for line in both] == ["ActorPlaced", "ActorFailed"]
    assert (await cli(["events", "--actor", "job", "--since", "1h"], snapshotting, capsys)).count("\n") == 5
    assert await cli(["events", "--actor", "nobody"], snapshotting, capsys) == "no events\n"


async def on_node(client: Client, actor_id: str, node_id: str) -> bool:
    return (await client.placements()).get(actor_id) == node_id


async def test_events_of_a_virtual_cluster_hold_its_work(
    live: Client, snapshotting: Mesh, capsys: pytest.CaptureFixture[str]
) -> None:
    client = live
    await client.register_node("n0", {"CPU": 4})
    await client.create_virtual_cluster("vc1", VirtualCluster(flexible_resource_min={"CPU": 2}))
    await client.submit(ScheduleRequest("inside", {"CPU": 1}, vcluster_id="vc1"))
    await client.submit(ScheduleRequest("outside", {"CPU": 1}))
    found = await client.history(vcluster_id="vc1")
    ids = " ".join(item.meaning for item in found)
    assert "inside" in ids and "outside" not in ids
    assert found[0].type == "VirtualClusterRequested"


def pump(source: IO[str], lines: queue.Queue[str]) -> None:
    """Hand each line of `source` over, until it ends."""
    for line in source:
        lines.put(line)


def next_line(lines: queue.Queue[str], timeout: float = 30.0) -> str:
    """The next line the follower printed; fails the test after `timeout` seconds without one."""
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        pytest.fail(f"corral events -f printed nothing within {timeout}s")


def test_events_follow_prints_new_events_until_interrupted(snapshotting: Mesh) -> None:
    with SyncClient(snapshotting.nats_url) as client:
        client.wait_ready()
        client.register_node("n0", {"CPU": 2})
        client.submit(ScheduleRequest("first", {"CPU": 1}))
        command = [sys.executable, "-m", "services.cli", "events", "-f", "--node", "n0"]
        follow = subprocess.Popen(
            [*command, "--nats-url", snapshotting.nats_url],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        lines: queue.Queue[str] = queue.Queue()
        assert follow.stdout is not None
        threading.Thread(target=pump, args=(follow.stdout, lines), daemon=True).start()
        try:
            printed = [next_line(lines) for _ in range(3)]  # the header, n0 joining, first placed
            assert "actor first placed on n0" in printed[2]
            client.submit(ScheduleRequest("second", {"CPU": 1}))
            assert "actor second placed on n0" in next_line(lines)
        finally:
            follow.send_signal(signal.SIGINT)
            deadline = time.monotonic() + 10
            while follow.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if follow.poll() is None:
                follow.kill()
        assert follow.wait() == 0


async def test_watch_yields_the_changes_of_an_actor_as_they_are_appended(live: Client) -> None:
    await live.register_node("n0", {"CPU": 1})
    await live.submit(ScheduleRequest("before", {"CPU": 1}))
    changes = live.watch(actor_id="later", since=datetime.now(UTC))

    async def change() -> LoggedEvent:
        return await asyncio.wait_for(anext(changes), 10)

    first = asyncio.create_task(change())
    await live.submit(ScheduleRequest("later", {"CPU": 1}))  # pending: n0 is full
    await live.remove_actor("before")
    seen = [await first, await change()]
    assert [event.type for event in seen] == ["ActorSubmitted", "ActorPending"]
    placed = await change()
    assert placed.meaning == "actor later placed on n0" and placed.cause == "before left"
    await changes.aclose()
