"""The compose test's driver (tests/compose) without a Docker engine: how it reports a service that cannot start,
and how it reads what the deployment shows (replica counts, image names, the leading scheduler's metric)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.compose.checks import leading
from tests.compose.engine import Engine
from tests.compose.images import repository
from tests.compose.project import Project, replicas
from tests.compose.shell import ComposeTestError, ServiceFailedError

RUNNING: dict[str, Any] = {"State": {"Status": "running"}, "RestartCount": 0}
CRASHED: dict[str, Any] = {"State": {"Status": "exited", "ExitCode": 2}, "RestartCount": 0}
RESTARTING: dict[str, Any] = {"State": {"Status": "restarting", "ExitCode": 1}, "RestartCount": 3}
STARTING: dict[str, Any] = {"State": {"Status": "running", "Health": {"Status": "starting"}}, "RestartCount": 0}


class ScriptedProject(Project):
    """A project whose containers are in the given states and whose logs say which service they belong to."""

    def __init__(self, states: dict[str, dict[str, Any]]) -> None:
        super().__init__(Engine({}, ["docker-compose"]), Path("compose.yaml"), "scripted")
        self.states = states

    def definitions(self) -> dict[str, dict[str, Any]]:
        return {service: {} for service in self.states}

    def containers(self, service: str) -> list[str]:
        return [service]

    def inspect(self, container: str) -> dict[str, Any]:
        return self.states[container]

    def logs(self, service: str) -> str:
        return f"{service} | Traceback (most recent call last):\n{service} | ModuleNotFoundError: services.nope"


@pytest.mark.parametrize(
    ("state", "why"),
    [(CRASHED, "exited with status 2"), (RESTARTING, "keeps restarting (3 restarts)")],
    ids=["exited", "restarting"],
)
def test_a_service_that_cannot_start_fails_the_run_at_once_with_its_log_tail(state: dict[str, Any], why: str) -> None:
    """The error names the service, what happened, and ends with the tail of its log; no deadline is waited out."""
    project = ScriptedProject({"nats": RUNNING, "labels": state, "taints": RUNNING})
    with pytest.raises(ServiceFailedError) as failure:
        project.wait_started(["nats", "labels", "taints"], deadline_s=600)
    message = str(failure.value)
    assert message.startswith(f"labels {why}\n--- compose logs --tail 50 labels:\n")
    assert message.endswith("labels | ModuleNotFoundError: services.nope")


def test_a_service_still_not_healthy_at_the_deadline_fails_with_its_log_tail() -> None:
    """A healthcheck that never passes: the error names the service after the deadline, with its log."""
    project = ScriptedProject({"nats": STARTING, "redis": RUNNING})
    with pytest.raises(ServiceFailedError, match=r"^nats is not up after 0\.1 s\n--- compose logs --tail 50 nats:"):
        project.wait_started(["redis", "nats"], deadline_s=0.1)


def test_services_that_are_all_up_pass() -> None:
    """Every container running (and healthy where it has a healthcheck): the wait returns."""
    healthy = {"State": {"Status": "running", "Health": {"Status": "healthy"}}, "RestartCount": 0}
    ScriptedProject({"nats": healthy, "labels": RUNNING}).wait_started(["nats", "labels"], deadline_s=5)


def test_replicas_read_as_compose_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """1 without `deploy`, the number given, a `${VAR:-N}` from the environment or its default."""
    monkeypatch.delenv("CORRAL_DECISION_WORKERS", raising=False)
    workers = {"deploy": {"replicas": "${CORRAL_DECISION_WORKERS:-0}"}}
    assert [replicas({}), replicas({"deploy": {"replicas": 2}}), replicas(workers)] == [1, 2, 0]
    monkeypatch.setenv("CORRAL_DECISION_WORKERS", "3")
    assert replicas(workers) == 3


def test_an_image_is_stood_in_by_its_repository_name() -> None:
    """The tag and nothing else is dropped, a registry path kept."""
    names = ["nats:2.11-alpine", "prom/prometheus:v3.5.0", "python", "localhost:5000/redis:7"]
    assert [repository(name) for name in names] == ["nats", "prom/prometheus", "python", "localhost:5000/redis"]


def test_the_leading_scheduler_is_read_from_its_metrics() -> None:
    """`corral_leader_leading` 1 leads, 0 follows; a scrape without it is an error, not a follower."""
    exported = '# HELP corral_leader_leading_ratio 1 while leading\ncorral_leader_leading_ratio{job="s"} {value}\n'
    assert leading(exported.replace("{value}", "1.0")) is True
    assert leading(exported.replace("{value}", "0.0")) is False
    with pytest.raises(ComposeTestError, match="no corral_leader_leading"):
        leading("corral_leader_epoch 3\n")
