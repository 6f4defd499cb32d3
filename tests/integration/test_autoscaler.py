"""The autoscaler through the bus, with the `local` provider: it launches the nodes pending work needs (by
Corral's own rules), scales idle nodes down through the scale-down taint, and resumes after a kill -9."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import anyio
import pytest

from schemas import (
    AnyEvent,
    AutoscalerElected,
    Exists,
    NodeAffinitySchedulingStrategy,
    NodeDied,
    NodeDrainCancelled,
    NodeDrainStarted,
    NodesLaunchRequested,
    NodeTerminationRequested,
    Placed,
    ScheduleRequest,
    TaintsChanged,
)
from schemas import subjects as s
from services.client import Client, UnavailableError
from services.core.labels import LAUNCH_ID, NODE_TYPE, SCALE_DOWN_TAINT
from services.local.mesh import SERVICES, Mesh, ServiceProcess
from services.runtime.codec import decode, encode
from services.runtime.runner import EXIT_LEASE_LOST
from tests.integration.autoscaling import (
    ACTS_WITHIN_S,
    FAST_AUTOSCALER,
    autoscaled_mesh,
    events_of,
    launch_requests,
    write_config,
)
from tests.integration.conftest import holds_within, log_of, start_test_mesh, wait_ready
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_a_tolerated_gpu_actor_gets_a_gpu_node_launched_and_placed_on_it(
    tmp_path: Path, server_path: ServerPath
) -> None:
    config = write_config(tmp_path)
    async with autoscaled_mesh(tmp_path / "mesh", server_path, config) as (mesh, client):
        trainer = ScheduleRequest("trainer", {"GPU": 1}, tolerations={"gpu_node": Exists()})
        assert not isinstance(await client.submit(trainer), Placed)
        placed = await client.wait_placed("trainer", timeout=ACTS_WITHIN_S)
        node = next(n for n in await client.nodes() if n.node_id == placed.node_id)
        assert node.labels[NODE_TYPE] == "gpu-a100" and node.labels[LAUNCH_ID]
        requests = launch_requests(await events_of(mesh))
        assert [(r.node_type, len(r.launch_ids), r.work) for r in requests] == [("gpu-a100", 1, ["trainer"])]
        status = await client.autoscaler_status()
        gpu = next(t for t in status.node_types if t.name == "gpu-a100")
        assert (gpu.running, gpu.launching) == (1, 0)
        assert status.launches[0].state == "registered"


async def test_an_idle_launched_node_is_tainted_then_terminated_and_removed(
    tmp_path: Path, server_path: ServerPath
) -> None:
    config = write_config(tmp_path, idle=0.5)
    async with autoscaled_mesh(tmp_path / "mesh", server_path, config) as (mesh, client):
        await client.submit(ScheduleRequest("job", {"CPU": 1}))
        node_id = await placed_on(client, "job")
        await client.remove_actor("job")
        assert await holds_within(lambda: gone(client, node_id), timeout=ACTS_WITHIN_S)
        events = await events_of(mesh)
        drained = [e for e in events if isinstance(e, NodeDrainStarted)]
        terminated = [e for e in events if isinstance(e, NodeTerminationRequested)]
        tainted = [e for e in events if isinstance(e, TaintsChanged) and e.node_id == node_id]
        assert [e.node_id for e in drained] == [e.node_id for e in terminated] == [node_id]
        assert [t.key for t in tainted[0].taints] == [SCALE_DOWN_TAINT]
        assert events.index(tainted[0]) < events.index(terminated[0])
        status = await client.autoscaler_status()
        assert [(t.node_id, t.state) for t in status.terminations] == [(node_id, "terminated")]


async def placed_on(client: Client, actor_id: str) -> str:
    """The node the actor is placed on, once it is."""
    node_id = (await client.wait_placed(actor_id, timeout=ACTS_WITHIN_S)).node_id
    assert node_id is not None
    return node_id


async def gone(client: Client, node_id: str) -> bool:
    """Whether the node is no longer live."""
    return node_id not in {node.node_id for node in await client.nodes()}


async def test_work_placed_on_a_draining_node_keeps_it(tmp_path: Path, server_path: ServerPath) -> None:
    """The autoscaler is paused (SIGSTOP) the moment it decides to drain the idle node; work that tolerates the
    scale-down taint is then placed there; resumed, the autoscaler cancels the drain, removes the taint, and never
    terminates the node."""
    config = write_config(tmp_path, idle=0.5)
    async with autoscaled_mesh(tmp_path / "mesh", server_path, config) as (mesh, client):
        await client.submit(ScheduleRequest("job", {"CPU": 1}))
        node_id = await placed_on(client, "job")
        autoscaler = mesh.processes["autoscaler"]
        decisions = await client.bus.nc.subscribe(s.AUTOSCALER_DECISIONS)
        await client.remove_actor("job")
        while not isinstance(decode((await decisions.next_msg(timeout=10.0)).data, AnyEvent), NodeDrainStarted):
            pass
        autoscaler.send_signal(signal.SIGSTOP)
        try:
            late = ScheduleRequest(
                "late",
                {"CPU": 1},
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id),
                tolerations={SCALE_DOWN_TAINT: Exists()},
            )
            assert await client.submit(late) == Placed("late", node_id)
        finally:
            autoscaler.send_signal(signal.SIGCONT)
        while not isinstance(decode((await decisions.next_msg(timeout=10.0)).data, AnyEvent), NodeDrainCancelled):
            pass
        assert await holds_within(lambda: untainted(client, node_id), timeout=ACTS_WITHIN_S)
        assert not [e for e in await events_of(mesh) if isinstance(e, NodeTerminationRequested)]
        assert node_id in {node.node_id for node in await client.nodes()}
        assert (await client.decision("late")) == Placed("late", node_id)


async def untainted(client: Client, node_id: str) -> bool:
    """Whether the node no longer carries the scale-down taint."""
    return not any(t.key == SCALE_DOWN_TAINT for t in (await client.taints(node_id)).get(node_id, []))


async def test_an_autoscaler_killed_mid_launch_loses_and_doubles_no_launch(
    tmp_path: Path, server_path: ServerPath
) -> None:
    """kill -9 the moment the launch is in the log (its node may or may not have registered yet), start it again:
    one launch in the log, its node registered, the actor placed there."""
    config = write_config(tmp_path)
    slow_death = {"CORRAL_HEARTBEAT_TIMEOUT": "10"}  # a node whose agent died with the autoscaler is resumed first
    async with autoscaled_mesh(tmp_path / "mesh", server_path, config, slow_death) as (mesh, client):
        decisions = await client.bus.nc.subscribe(s.AUTOSCALER_DECISIONS)
        await client.submit(ScheduleRequest("job", {"CPU": 1}))
        while not isinstance(decode((await decisions.next_msg(timeout=10.0)).data, AnyEvent), NodesLaunchRequested):
            pass
        mesh.stop_service("autoscaler", hard=True)
        mesh.start_service("autoscaler")
        placed = await client.wait_placed("job", timeout=15.0)
        requests = launch_requests(await events_of(mesh))
        assert [(r.node_type, r.launch_ids) for r in requests] == [("cpu-4", ["L1"])]
        assert placed.node_id == "cpu-4-L1"
        launched = [n.node_id for n in await client.nodes() if n.labels.get(LAUNCH_ID)]
        assert launched == ["cpu-4-L1"]


async def test_an_autoscaler_killed_while_a_node_idles_goes_on_counting_its_idle_time_after_a_restart(
    tmp_path: Path, server_path: ServerPath
) -> None:
    """idle_timeout_s 12: the launched node's work is removed, the autoscaler is killed (kill -9) 8 s later and
    started again: the idle time is the log's, so the node is drained and terminated about 4 s after the restart,
    before a whole idle_timeout_s from it (a count started again would take 12 s more, from the restarted
    autoscaler's first round): 7 s of margin for the restart and the termination on a busy machine."""
    config = write_config(tmp_path, idle=12)
    slow_death = {"CORRAL_HEARTBEAT_TIMEOUT": "20"}  # the node's agent, gone with the autoscaler, is resumed first
    async with autoscaled_mesh(tmp_path / "mesh", server_path, config, slow_death) as (mesh, client):
        await client.submit(ScheduleRequest("job", {"CPU": 1}))
        node_id = await placed_on(client, "job")
        await client.remove_actor("job")
        await anyio.sleep(8.0)  # the node idles for two thirds of idle_timeout_s under this autoscaler
        mesh.stop_service("autoscaler", hard=True)
        assert not [e for e in await events_of(mesh) if isinstance(e, NodeDrainStarted)]
        restarted = time.monotonic()
        mesh.start_service("autoscaler")
        assert await holds_within(lambda: gone(client, node_id), timeout=restarted + 11 - time.monotonic())
        events = await events_of(mesh)
        (terminated,) = [e for e in events if isinstance(e, NodeTerminationRequested)]
        died = [e for e in events if isinstance(e, NodeDied)]  # its removal, not a death while the agent was away
        assert terminated.node_id == node_id and events.index(terminated) < events.index(died[0])


async def test_a_launch_decided_by_an_instance_that_died_before_starting_it_is_started_by_the_next(
    tmp_path: Path, server_path: ServerPath
) -> None:
    """The log holds a launch nobody started (its decider died right after appending it): the autoscaler that
    leads next starts it with the same launch id, and launches nothing else."""
    config = write_config(tmp_path)
    env = {**FAST_AUTOSCALER, "CORRAL_AUTOSCALER_CONFIG": str(config)}
    mesh = start_test_mesh(tmp_path / "mesh", server_path, SERVICES, env)
    try:
        async with Client(mesh.nats_url, timeout=10.0) as client:
            await wait_ready(client)
            decided = NodesLaunchRequested(
                event_id="earlier", node_type="cpu-4", launch_ids=["L1"], reason="test", requested_at=time.time()
            )
            await client.bus.js.publish(s.AUTOSCALER_DECISIONS, encode(decided))
            mesh.start_service("autoscaler")
            await client.wait_autoscaler(timeout=15.0)
            assert await holds_within(lambda: registered(client, "cpu-4-L1"), timeout=ACTS_WITHIN_S)
            status = await client.autoscaler_status()
            assert [(launch.launch_id, launch.state) for launch in status.launches] == [("L1", "registered")]
            assert len(launch_requests(await events_of(mesh))) == 1
    finally:
        mesh.close()


async def registered(client: Client, node_id: str) -> bool:
    """Whether the node is live."""
    return node_id in {node.node_id for node in await client.nodes()}


async def test_an_autoscaler_whose_lease_another_took_stops_deciding_and_the_next_one_leads_above_it(
    tmp_path: Path, server_path: ServerPath
) -> None:
    """Another instance takes the lease and appends its election: the leader exits (code 3) and appends nothing
    after that election; started again, it wins the lease at a newer epoch and leads."""
    async with autoscaled_mesh(tmp_path / "mesh", server_path, write_config(tmp_path)) as (mesh, client):
        kv = await client.bus.js.key_value(s.AUTOSCALER_LEASE_BUCKET)
        held = await kv.get(s.AUTOSCALER_LEASE_KEY)
        assert held.revision is not None
        epoch = await kv.update(s.AUTOSCALER_LEASE_KEY, b"elsewhere 1", last=held.revision)
        newer = AutoscalerElected(event_id="newer", instance="elsewhere", epoch=epoch)
        await client.bus.js.publish(s.AUTOSCALER_DECISIONS, encode(newer))
        autoscaler = mesh.processes["autoscaler"]
        assert await holds_within(lambda: exited(autoscaler), timeout=ACTS_WITHIN_S)
        assert autoscaler.returncode == EXIT_LEASE_LOST
        events = await events_of(mesh)
        assert not [e for e in events[events.index(newer) + 1 :] if isinstance(e, s.AUTOSCALER_EVENTS)]
        mesh.start_service("autoscaler")
        await client.wait_autoscaler(timeout=15.0)
        elections = [e for e in await events_of(mesh) if isinstance(e, AutoscalerElected)]
        assert elections[-1].instance == "autoscaler" and elections[-1].epoch > epoch


async def test_an_election_no_lease_backs_is_ignored_and_the_leader_goes_on(
    tmp_path: Path, server_path: ServerPath
) -> None:
    """A forged election (the mesh runs without NATS users here) does not stop the leader, which still holds the
    lease: it goes on deciding, its next decisions appended after the forgery."""
    async with autoscaled_mesh(tmp_path / "mesh", server_path, write_config(tmp_path)) as (mesh, client):
        forged = AutoscalerElected(event_id="forged", instance="forger", epoch=1_000_000)
        await client.bus.js.publish(s.AUTOSCALER_DECISIONS, encode(forged))
        await client.submit(ScheduleRequest("job", {"CPU": 1}))
        await client.wait_placed("job", timeout=ACTS_WITHIN_S)
        events = await events_of(mesh)
        assert launch_requests(events[events.index(forged) :])
        assert mesh.processes["autoscaler"].poll() is None


async def exited(process: ServiceProcess) -> bool:
    """Whether the process has exited."""
    return process.poll() is not None


async def test_a_drain_whose_taint_was_refused_sends_it_again_and_ends_in_termination(
    tmp_path: Path, server_path: ServerPath
) -> None:
    """The taints service is down when the drain is decided (its command goes unanswered); once it is back, the
    autoscaler taints the node again and terminates it."""
    async with autoscaled_mesh(tmp_path / "mesh", server_path, write_config(tmp_path, idle=0.5)) as (mesh, client):
        await client.submit(ScheduleRequest("job", {"CPU": 1}))
        node_id = await placed_on(client, "job")
        mesh.stop_service("taints")
        decisions = await client.bus.nc.subscribe(s.AUTOSCALER_DECISIONS)
        await client.remove_actor("job")
        while not isinstance(decode((await decisions.next_msg(timeout=10.0)).data, AnyEvent), NodeDrainStarted):
            pass
        assert await holds_within(lambda: refused_taint_logged(mesh), timeout=ACTS_WITHIN_S)
        mesh.start_service("taints")
        assert await holds_within(lambda: gone(client, node_id), timeout=15.0)


async def refused_taint_logged(mesh: Mesh) -> bool:
    """Whether the autoscaler logged a taint command that went unanswered."""
    return "autoscaler command refused" in log_of(mesh, "autoscaler")


async def test_a_standby_autoscaler_takes_over_when_the_leader_dies(tmp_path: Path, server_path: ServerPath) -> None:
    """Two instances: one leads (one election in the log), the other answers nothing; kill -9 the leader and the
    standby wins the lease, is elected at a newer epoch and launches for new work."""
    async with autoscaled_mesh(tmp_path / "mesh", server_path, write_config(tmp_path)) as (mesh, client):
        mesh.start_service("autoscaler", instance="autoscaler-2")
        first = (await client.autoscaler_status()).instance
        assert first == "autoscaler"
        mesh.stop_service("autoscaler", hard=True)

        async def standby_leads() -> bool:
            try:
                return (await client.autoscaler_status()).instance == "autoscaler-2"
            except UnavailableError:
                return False

        assert await holds_within(standby_leads, timeout=15.0)
        elections = [e for e in await events_of(mesh) if isinstance(e, AutoscalerElected)]
        assert [e.instance for e in elections] == ["autoscaler", "autoscaler-2"]
        assert elections[1].epoch > elections[0].epoch
        await client.submit(ScheduleRequest("job", {"CPU": 1}))
        assert (await placed_on(client, "job")).startswith("cpu-4-")
