"""One compose project: a compose file brought up under a project name of its own, its containers, their logs."""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.compose.engine import Engine
from tests.compose.shell import ComposeTestError, ServiceFailedError, run, say, tail, wait_for

UP_S = 1200.0
"""The first `up` builds Corral's image (pip installs the dependencies from PyPI)."""
LOG_LINES = 50
PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
DEFAULTED = re.compile(r"^\$\{(\w+):-(\d+)\}$")


def replicas(definition: dict[str, Any]) -> int:
    """How many containers compose runs for a service: `deploy.replicas` (a `${VAR:-N}` read as the environment
    would set it), 1 without."""
    wanted = definition.get("deploy", {}).get("replicas", 1)
    if isinstance(wanted, str) and (match := DEFAULTED.match(wanted)):
        return int(os.environ.get(match[1], match[2]))
    return int(wanted)


def service_failure(service: str, why: str, logs: str) -> ServiceFailedError:
    """The error for a service that cannot start or serve: what happened and the tail of its log."""
    return ServiceFailedError(f"{service} {why}\n--- compose logs --tail {LOG_LINES} {service}:\n{logs}")


@dataclass
class Project:
    """`file` run as compose project `name` on `engine`."""

    engine: Engine
    file: Path
    name: str

    def compose(self, *args: str, timeout: float = 120.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`docker compose -p NAME -f FILE ARGS` (or docker-compose)."""
        command = [*self.engine.compose, "-p", self.name, "-f", str(self.file), *args]
        return run(command, timeout=timeout, env=self.engine.env, check=check)

    def definitions(self) -> dict[str, dict[str, Any]]:
        """The file's services as data (anchors and merge keys resolved)."""
        loaded = yaml.safe_load(self.file.read_text())
        return dict(loaded["services"])

    def images(self) -> dict[str, str]:
        """Each service that runs a public image, with that image."""
        return {name: spec["image"] for name, spec in self.definitions().items() if "image" in spec}

    def up(self, services: list[str]) -> None:
        """Build and start `services` (and what they depend on); a failed start names the services that did not come
        up, with their log tails."""
        try:
            self.compose("up", "-d", "--build", *services, timeout=UP_S)
        except ComposeTestError as error:
            raise self.first_failure(services) or error from error

    def down(self) -> None:
        """Remove the containers, the networks and the volumes (never raises: it runs on the way out of a failure)."""
        try:
            result = self.compose("down", "-v", "--remove-orphans", "-t", "5", timeout=240, check=False)
        except ComposeTestError as error:
            say(f"down -v failed: {error}")
            return
        if result.returncode != 0:
            say(f"down -v exited {result.returncode}: {tail(result.stdout + result.stderr, 10)}")

    def logs(self, service: str) -> str:
        """The last LOG_LINES lines of `service`'s log."""
        result = self.compose("logs", "--no-color", "--tail", str(LOG_LINES), service, timeout=60, check=False)
        return tail(result.stdout + result.stderr, LOG_LINES * 3)

    def containers(self, service: str) -> list[str]:
        """The ids of `service`'s containers, running or not, oldest first."""
        filters = ["--filter", f"label={PROJECT_LABEL}={self.name}", "--filter", f"label={SERVICE_LABEL}={service}"]
        found = self.engine.docker("ps", "-a", "-q", "--no-trunc", *filters, timeout=30).stdout.split()
        return list(reversed(found))

    def inspect(self, container: str) -> dict[str, Any]:
        """`docker inspect` of one container."""
        (details,) = json.loads(self.engine.docker("inspect", container, timeout=30).stdout)
        return dict(details)

    def address(self, container: str) -> str:
        """The container's address on the project's network (the host reaches it directly)."""
        networks = self.inspect(container)["NetworkSettings"]["Networks"]
        return str(next(iter(networks.values()))["IPAddress"])

    def problem(self, container: str) -> str | None:
        """Why `container` is not up (exited, restarting, unhealthy), or None while it is up or still starting."""
        details = self.inspect(container)
        state, restarts = details["State"], details["RestartCount"]
        health = state.get("Health", {}).get("Status")
        if state["Status"] in {"exited", "dead"}:
            return f"exited with status {state['ExitCode']}"
        if state["Status"] == "restarting" or restarts:
            return f"keeps restarting ({restarts} restarts)"
        if health == "unhealthy":
            return "is unhealthy (its healthcheck fails)"
        return None

    def up_now(self, container: str) -> bool:
        """Running, and healthy where it has a healthcheck."""
        state = self.inspect(container)["State"]
        return bool(state["Status"] == "running" and state.get("Health", {}).get("Status", "healthy") == "healthy")

    def first_failure(self, services: list[str]) -> ServiceFailedError | None:
        """The first of `services` with a container that is not up, as an error with its log tail."""
        for service in services:
            for container in self.containers(service):
                if why := self.problem(container):
                    return service_failure(service, why, self.logs(service))
        return None

    def wait_started(self, services: list[str], deadline_s: float) -> None:
        """Every container of `services` up (healthy where checked); fail at the first that exits, restarts or turns
        unhealthy, or at the deadline, with the log tail of the service that is not up."""
        expected = {name: replicas(self.definitions()[name]) for name in services}

        def all_up() -> bool | None:
            if failure := self.first_failure(services):
                raise failure
            return True if self.not_up(expected) is None else None

        try:
            wait_for("every service running", all_up, deadline_s, every_s=2.0)
        except ServiceFailedError:
            raise
        except ComposeTestError as error:
            if slow := self.not_up(expected):
                raise service_failure(slow, f"is not up after {deadline_s:g} s", self.logs(slow)) from error
            raise

    def not_up(self, expected: dict[str, int]) -> str | None:
        """The first service with fewer containers up than it should have."""
        for service, count in expected.items():
            if sum(self.up_now(container) for container in self.containers(service)) < count:
                return service
        return None
