"""The checks of one deployment, step by step: up, ready, nodes, placements, the page and metrics, then a killed
leading scheduler, a killed service and (on the cluster) a killed NATS server, with nothing lost."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.compose import checks
from tests.compose.checks import ROOT, User
from tests.compose.project import Project, service_failure
from tests.compose.shell import ComposeTestError, ServiceFailedError, Steps, say, wait_for

ACTORS = "compose-test-"
START_S = 300.0
READY_S = 180.0
NODES_S = 180.0
LEADER_S = 60.0
SERVE_AGAIN_S = 120.0
CLUSTER_NODES = 10
NATS_MONITOR_PORT = 8222


@dataclass
class Deployment:
    """One compose project being checked: its services (those started, those running Corral's image), the user's
    view of it, the placements made so far."""

    project: Project
    steps: Steps
    services: list[str]
    corral_services: list[str]
    user: User
    placed: dict[str, str | None] = field(default_factory=dict)
    submitted: int = 0

    def place(self, count: int) -> None:
        """`corral submit --wait` of `count` new actors (a new id each try); each is placed."""
        for _ in range(count):
            self.submitted += 1
            actor = f"{ACTORS}{self.submitted}"
            self.placed[actor] = self.user.submit(actor)
            say(f"{actor} placed on {self.placed[actor]}")

    def placed_one(self) -> bool:
        """True once one more actor is placed (for a wait that retries a submit refused while NATS elects)."""
        self.place(1)
        return True

    def nothing_lost(self) -> None:
        """Every actor placed so far is still where it was placed."""
        now = self.user.placements(ACTORS)
        moved = {actor: (node, now.get(actor)) for actor, node in self.placed.items() if now.get(actor) != node}
        if moved:
            raise ComposeTestError(f"placements changed or were lost (before, now): {moved}")

    def serving(self) -> None:
        """/readyz answers 200 within SERVE_AGAIN_S; otherwise the error carries the log tail of each service the
        answer names."""
        try:
            wait_for("/readyz answering 200", self.user.ready, SERVE_AGAIN_S)
        except ComposeTestError as error:
            named = [service for service in self.corral_services if service in str(error)]
            raise self.failure(named or self.corral_services, str(error)) from error

    def failure(self, services: list[str], why: str) -> ServiceFailedError:
        """`why`, with the log tail of the first of `services`."""
        return service_failure(services[0], why, self.project.logs(services[0]))


def start(deployment: Deployment) -> None:
    """Up, every container running, every service answering."""
    project, steps = deployment.project, deployment.steps
    with steps.step(f"up {project.file.name} as project {project.name}: {' '.join(deployment.services)}"):
        project.up(deployment.services)
    with steps.step("every container running (healthy where it has a healthcheck)"):
        project.wait_started(deployment.services, START_S)
    with steps.step("/readyz: every service answers"):
        deployment.serving()


def wait_nodes(deployment: Deployment, count: int) -> None:
    """At least `count` nodes registered; else the failure says how many were, with the logs of `sim` (which
    registers them) and `labels` (which folds them)."""
    seen = [0]

    def enough() -> bool | None:
        seen[0] = deployment.user.node_count()
        return seen[0] >= count or None

    with deployment.steps.step(f"{count} nodes registered"):
        try:
            wait_for(f"{count} nodes registered", enough, NODES_S)
        except ComposeTestError as error:
            logs = {name: deployment.project.logs(name) for name in ("sim", "labels") if name in deployment.services}
            said = "".join(f"\n--- compose logs {name}:\n{text}" for name, text in logs.items())
            raise ComposeTestError(f"{error} ({seen[0]} were){said}") from error


def user_checks(deployment: Deployment) -> None:
    """Placements with `corral submit --wait`, `corral status`, the web page, and /metrics of every container."""
    with deployment.steps.step("corral submit --wait (3 actors), corral status"):
        deployment.place(3)
        deployment.user.corral("status")
    with deployment.steps.step("the web page and /metrics of every service container"):
        deployment.user.page()
        for service in deployment.corral_services:
            for container in deployment.project.containers(service):
                checks.metrics(deployment.project.address(container))
        say(f"/metrics answered for {', '.join(deployment.corral_services)}")


def leader(deployment: Deployment, among: list[str]) -> str:
    """The scheduler container (of `among`) whose /metrics says it leads, waited for."""

    def find() -> str | None:
        leading = [c for c in among if checks.leading(checks.metrics(deployment.project.address(c)))]
        return leading[0] if len(leading) == 1 else None

    return wait_for("one leading scheduler", find, LEADER_S)


def kill_leading_scheduler(deployment: Deployment) -> None:
    """`docker kill` of the leading scheduler: the standby leads, a new request is placed, nothing is lost."""
    project = deployment.project
    schedulers = project.containers("scheduler")
    with deployment.steps.step("docker kill the leading scheduler: the standby takes over"):
        old = leader(deployment, schedulers)
        killed_at = time.monotonic()
        project.engine.docker("kill", old)
        new = leader(deployment, [c for c in schedulers if c != old])
        say(f"scheduler {new[:12]} leads {time.monotonic() - killed_at:.1f} s after {old[:12]} was killed")
        deployment.place(1)
        deployment.nothing_lost()
        restart(deployment, "scheduler", old)


def restart(deployment: Deployment, service: str, container: str) -> None:
    """Start a killed container again (its restart policy may have already) and wait until it is up."""
    project = deployment.project
    project.engine.docker("start", container, check=False)
    try:
        wait_for(f"{service} up again", lambda: project.up_now(container) or None, START_S)
    except ComposeTestError as error:
        raise deployment.failure([service], f"did not come back: {error}") from error


def kill_service(deployment: Deployment, service: str) -> None:
    """`docker kill` of a service, started again: the mesh serves, its nodes and placements are all there."""
    project = deployment.project
    with deployment.steps.step(f"docker kill {service}, start it again: nothing lost"):
        nodes = deployment.user.node_count()
        (container, *_) = project.containers(service)
        project.engine.docker("kill", container)
        restart(deployment, service, container)
        deployment.serving()
        deployment.nothing_lost()
        deployment.place(1)
        wait_for(f"the {nodes} nodes known again", lambda: deployment.user.node_count() >= nodes or None, NODES_S)


def stream_leader(deployment: Deployment, servers: list[str]) -> str | None:
    """The NATS server that leads the event log (CORRAL_EVENTS), asked of a server's monitoring port; None if no
    server says."""
    for server in servers:
        for container in deployment.project.containers(server):
            address = deployment.project.address(container)
            try:
                _, body = checks.http_get(f"http://{address}:{NATS_MONITOR_PORT}/jsz?accounts=true&streams=true")
                accounts = json.loads(body).get("account_details", [])
            except (ComposeTestError, ValueError):
                continue
            for stream in (stream for account in accounts for stream in account.get("stream_detail", [])):
                if stream.get("name") == "CORRAL_EVENTS" and stream.get("cluster", {}).get("leader") in servers:
                    return str(stream["cluster"]["leader"])
    return None


def kill_nats_server(deployment: Deployment, servers: list[str]) -> None:
    """`docker kill` of the NATS server leading the event log: requests are placed again, nothing is lost, and the
    server, started again, is healthy."""
    project = deployment.project
    with deployment.steps.step("docker kill the NATS server leading the event log (R3): the mesh serves on"):
        victim = stream_leader(deployment, servers)
        say(f"{victim} leads CORRAL_EVENTS" if victim else f"no server names the leader of CORRAL_EVENTS: {servers[1]}")
        victim = victim or servers[1]
        (container, *_) = project.containers(victim)
        killed_at = time.monotonic()
        project.engine.docker("kill", container)
        wait_for("a request placed without the killed server", deployment.placed_one, SERVE_AGAIN_S)
        say(f"placed again {time.monotonic() - killed_at:.1f} s after {victim} was killed")
        deployment.serving()
        deployment.nothing_lost()
        restart(deployment, victim, container)


@contextmanager
def host_simulator(nats_url: str, nodes: int, log: Path) -> Iterator[None]:
    """`corral sim --nodes N` on the host (as user `agent`), stopped on the way out."""
    command = [sys.executable, "-m", "services.cli", "sim", "--nodes", str(nodes), "--nats-url", nats_url]
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def published_ports(project: Project, services: list[str]) -> list[int]:
    """The host ports `services` publish (`"4223:4222"` gives 4223)."""
    definitions = project.definitions()
    return [int(str(port).split(":")[0]) for name in services for port in definitions[name].get("ports", [])]


def single_server(deployment: Deployment) -> None:
    """compose.yaml: its simulator registers 100 nodes."""
    start(deployment)
    wait_nodes(deployment, 100)
    user_checks(deployment)
    kill_leading_scheduler(deployment)
    kill_service(deployment, "labels")


def cluster(deployment: Deployment, servers: list[str], sim_log: Path) -> None:
    """compose.cluster.yaml: nodes from a simulator on the host, and a NATS server killed as well."""
    start(deployment)
    ports = published_ports(deployment.project, servers)
    with host_simulator(checks.client_url(ports, user="agent"), CLUSTER_NODES, sim_log):
        wait_nodes(deployment, CLUSTER_NODES)
        user_checks(deployment)
        kill_leading_scheduler(deployment)
        kill_service(deployment, "labels")
        kill_nats_server(deployment, servers)
