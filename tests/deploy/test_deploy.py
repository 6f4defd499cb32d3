"""The deploy/ folder, checked without a Docker engine: the compose file against the compose spec, NATS's config."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
NATS_CONF = DEPLOY / "nats.conf"
NATS_SERVER = Path(sys.executable).parent / "nats-server"

NATS_USERS = ("labels", "taints", "vclusters", "scheduler", "decider", "autoscaler", "agent", "client", "gateway")
SERVICES_WITH_OWN_USER = ("labels", "taints", "vclusters", "scheduler", "decider", "autoscaler", "gateway")


def validate_compose(path: Path) -> subprocess.CompletedProcess[str]:
    """Check one compose file against the compose spec vendored in check-jsonschema (offline)."""
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def load_compose() -> dict[str, Any]:
    """The compose file as data, YAML anchors and merge keys resolved."""
    loaded = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(loaded, dict)
    return loaded


def password_environment() -> dict[str, str]:
    """The process environment plus a development password for every NATS user."""
    return {**os.environ, **{f"CORRAL_{user.upper()}_PASSWORD": f"{user}-dev" for user in NATS_USERS}}


def test_the_compose_file_meets_the_compose_spec() -> None:
    """check-jsonschema accepts deploy/compose.yaml."""
    result = validate_compose(COMPOSE)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("service", "key", "bad_value"),
    [
        ("nats", "ports", 5),
        ("labels", "depends_on", {"nats": {"condition": "service_ready"}}),
        ("scheduler", "replicas", 2),
    ],
    ids=["ports as a number", "an unknown depends_on condition", "replicas outside deploy"],
)
def test_a_broken_compose_file_is_rejected(tmp_path: Path, service: str, key: str, bad_value: object) -> None:
    """A copy of the compose file with one bad value fails the same check, so the check can fail."""
    broken = load_compose()
    broken["services"][service][key] = bad_value
    path = tmp_path / "compose.yaml"
    path.write_text(yaml.safe_dump(broken))
    result = validate_compose(path)
    assert result.returncode != 0, result.stdout + result.stderr


def test_the_compose_file_runs_nats_redis_the_services_the_gateway_the_simulator_and_metrics() -> None:
    """nats, redis, labels, taints, vclusters, scheduler, the decision workers, autoscaler, the gateway, the load
    simulator, prometheus and grafana."""
    services = {"nats", "redis", *SERVICES_WITH_OWN_USER, "sim", "prometheus", "grafana"}
    assert set(load_compose()["services"]) == services


def test_the_gateway_is_published_on_8265_and_guards_its_changes_with_a_token() -> None:
    """It listens on every interface of its container, port 8265 is published, and CORRAL_HTTP_TOKEN is set."""
    gateway = load_compose()["services"]["gateway"]
    environment = gateway["environment"]
    assert (environment["CORRAL_HTTP_HOST"], environment["CORRAL_HTTP_PORT"], gateway["ports"]) == (
        "0.0.0.0",
        "8265",
        ["8265:8265"],
    )
    assert environment["CORRAL_HTTP_TOKEN"]


def test_the_autoscaler_reads_the_node_types_mounted_beside_the_compose_file() -> None:
    """Its CORRAL_AUTOSCALER_CONFIG names the file the compose file mounts from deploy/autoscaler.yaml."""
    autoscaler = load_compose()["services"]["autoscaler"]
    assert autoscaler["volumes"] == [f"./autoscaler.yaml:{autoscaler['environment']['CORRAL_AUTOSCALER_CONFIG']}:ro"]
    assert (DEPLOY / "autoscaler.yaml").is_file()


def test_the_scheduler_runs_one_active_and_one_standby_replica() -> None:
    """Two scheduler replicas share the lease: one decides, one follows the log."""
    assert load_compose()["services"]["scheduler"]["deploy"]["replicas"] == 2


@pytest.mark.parametrize("service", SERVICES_WITH_OWN_USER, ids=lambda service: f"{service} connects as {service}")
def test_each_service_connects_to_nats_as_its_own_user(service: str) -> None:
    """A service's CORRAL_NATS_URL names its own NATS user and its own password variable."""
    url = load_compose()["services"][service]["environment"]["CORRAL_NATS_URL"]
    password = f"${{CORRAL_{service.upper()}_PASSWORD:-{service}-dev}}"
    assert url == f"nats://{service}:{password}@nats:4222"


def test_the_simulator_connects_as_an_agent() -> None:
    """The load simulator speaks for node agents, so it gets the agent's narrow permissions."""
    url = load_compose()["services"]["sim"]["environment"]["CORRAL_NATS_URL"]
    assert url.startswith("nats://agent:${CORRAL_AGENT_PASSWORD:-agent-dev}@")


def test_the_nats_config_names_a_user_for_each_service_agents_and_clients() -> None:
    """deploy/nats.conf has exactly one user per service (the gateway too) plus `agent` and `client`."""
    users = re.findall(r"^\s*user:\s*(\w+)\s*$", NATS_CONF.read_text(), flags=re.MULTILINE)
    assert sorted(users) == sorted(NATS_USERS)


def test_the_nats_config_reads_every_password_from_the_environment() -> None:
    """No password is written in the file: each is a `$CORRAL_<USER>_PASSWORD` reference."""
    passwords = re.findall(r"^\s*password:\s*(\S+)\s*$", NATS_CONF.read_text(), flags=re.MULTILINE)
    assert sorted(passwords) == sorted(f"$CORRAL_{user.upper()}_PASSWORD" for user in NATS_USERS)


def run_nats_config_test(environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Ask nats-server to test deploy/nats.conf and exit (`-t`), without starting a server."""
    if not NATS_SERVER.exists():
        pytest.skip(f"no nats-server next to {sys.executable}")
    return subprocess.run(
        [str(NATS_SERVER), "-t", "-c", str(NATS_CONF)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env=environment,
    )


def test_nats_server_accepts_the_config_when_the_passwords_are_set() -> None:
    """`nats-server -t -c deploy/nats.conf` says the file is valid."""
    result = run_nats_config_test(password_environment())
    assert result.returncode == 0, result.stdout + result.stderr


def test_nats_server_refuses_the_config_when_a_password_is_missing() -> None:
    """An unset password variable stops NATS from starting rather than leaving a user open."""
    environment = password_environment()
    del environment["CORRAL_CLIENT_PASSWORD"]
    result = run_nats_config_test(environment)
    assert result.returncode != 0
    assert "CORRAL_CLIENT_PASSWORD" in result.stdout + result.stderr


PROMETHEUS = DEPLOY / "prometheus.yml"
DASHBOARD = DEPLOY / "grafana" / "corral-dashboard.json"
DASHBOARD_METRICS = (
    "corral_scheduler_decisions_total",
    "corral_scheduler_decision_duration_seconds_bucket",
    "corral_scheduler_request_latency_seconds_bucket",
    "corral_scheduler_pending",
    "corral_events_folded_total",
    "corral_follower_lag",
    "corral_snapshot_age_seconds",
    "corral_snapshot_size_bytes",
    "corral_snapshot_build_duration_seconds_bucket",
    "corral_leader_epoch",
    "corral_leader_elections_total",
    "corral_vclusters_queued",
    "corral_gateway_requests_total",
)
"""What the dashboard must show (the metric names docs/metrics.md lists)."""


@pytest.mark.parametrize("service", SERVICES_WITH_OWN_USER)
def test_prometheus_scrapes_every_replica_of_each_service_on_its_metrics_port(service: str) -> None:
    """The service serves /metrics on all its addresses, and a scrape job finds each replica there by DNS."""
    environment = load_compose()["services"][service]["environment"]
    port = int(environment["CORRAL_METRICS_PORT"])
    assert port and environment["CORRAL_METRICS_HOST"] == "0.0.0.0"
    jobs = {job["job_name"]: job for job in yaml.safe_load(PROMETHEUS.read_text())["scrape_configs"]}
    (discovery,) = jobs[service]["dns_sd_configs"]
    assert discovery == {"names": [service], "type": "A", "port": port}


def test_prometheus_and_grafana_mount_files_that_exist() -> None:
    """Every file or folder mounted from deploy/ into prometheus and grafana is there."""
    for service in ("prometheus", "grafana"):
        for volume in load_compose()["services"][service]["volumes"]:
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (DEPLOY / source).exists(), (service, source)


def test_the_grafana_dashboard_shows_each_metric_the_issue_names_from_the_provisioned_prometheus() -> None:
    """Valid JSON; every panel queries the provisioned Prometheus data source; every listed metric is on a panel."""
    dashboard = json.loads(DASHBOARD.read_text())
    source = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yaml").read_text())
    (uid,) = [entry["uid"] for entry in source["datasources"]]
    expressions = " ".join(target["expr"] for panel in dashboard["panels"] for target in panel["targets"])
    assert all(panel["datasource"]["uid"] == uid for panel in dashboard["panels"])
    assert [name for name in DASHBOARD_METRICS if name not in expressions] == []


COMPOSE_CLUSTER = DEPLOY / "compose.cluster.yaml"
NATS_CLUSTER_CONF = DEPLOY / "nats-cluster.conf"
NATS_NODES = ("nats-1", "nats-2", "nats-3")


def load_cluster_compose() -> dict[str, Any]:
    """compose.cluster.yaml as data, YAML anchors and merge keys resolved."""
    loaded = yaml.safe_load(COMPOSE_CLUSTER.read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_the_cluster_compose_file_meets_the_compose_spec() -> None:
    """check-jsonschema accepts deploy/compose.cluster.yaml."""
    result = validate_compose(COMPOSE_CLUSTER)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_broken_cluster_compose_file_is_rejected(tmp_path: Path) -> None:
    """The same check fails on a copy whose first NATS server has its volumes as a number."""
    broken = load_cluster_compose()
    broken["services"]["nats-1"]["volumes"] = 5
    path = tmp_path / "compose.cluster.yaml"
    path.write_text(yaml.safe_dump(broken))
    assert validate_compose(path).returncode != 0


def test_the_cluster_runs_three_named_nats_servers_each_with_its_own_volume_and_the_cluster_config() -> None:
    """nats-1..3 run JetStream under nats-cluster.conf, each named as its peers' routes name it, each on a volume of
    its own, and nats-cluster.conf routes to all three."""
    services = load_cluster_compose()["services"]
    volumes = [services[name]["volumes"][0] for name in NATS_NODES]
    assert volumes == [f"{name}-data:/data" for name in NATS_NODES]
    for name in NATS_NODES:
        command = services[name]["command"]
        assert command[:2] == ["--name", name] and command[-2:] == ["-c", "/etc/nats/nats-cluster.conf"]
    routes = re.findall(r"nats-route://([\w-]+):6222", NATS_CLUSTER_CONF.read_text())
    assert sorted(routes) == list(NATS_NODES)


@pytest.mark.parametrize("service", SERVICES_WITH_OWN_USER, ids=lambda service: f"{service} connects to all three")
def test_each_cluster_service_connects_to_every_nats_server_as_its_own_user_at_three_replicas(service: str) -> None:
    """CORRAL_NATS_URL lists the three servers with the service's own user; streams and buckets are kept on 3."""
    environment = load_cluster_compose()["services"][service]["environment"]
    password = f"${{CORRAL_{service.upper()}_PASSWORD:-{service}-dev}}"
    assert environment["CORRAL_NATS_URL"].split(",") == [
        f"nats://{service}:{password}@{name}:4222" for name in NATS_NODES
    ]
    assert environment["CORRAL_REPLICAS"] == "3"


def test_nats_server_accepts_the_cluster_config_with_the_users_of_nats_conf() -> None:
    """`nats-server -t -c deploy/nats-cluster.conf` is valid, and it includes nats.conf (one set of users)."""
    if not NATS_SERVER.exists():
        pytest.skip(f"no nats-server next to {sys.executable}")
    command = [str(NATS_SERVER), "-t", "-c", str(NATS_CLUSTER_CONF), "--name", "nats-1"]
    result = subprocess.run(
        command, capture_output=True, text=True, check=False, timeout=60, env=password_environment()
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "include ./nats.conf" in NATS_CLUSTER_CONF.read_text()


@pytest.mark.parametrize("load", [load_compose, load_cluster_compose], ids=["compose", "cluster"])
def test_one_setting_runs_the_decision_workers_and_tells_the_scheduler_to_wait_for_them(
    load: Callable[[], dict[str, Any]],
) -> None:
    """CORRAL_DECISION_WORKERS (0 by default) is both the deciders' replica count and the scheduler's setting: a
    scheduler told of workers that do not run would leave every request waiting."""
    services = load()["services"]
    setting = "${CORRAL_DECISION_WORKERS:-0}"
    assert services["decider"]["deploy"]["replicas"] == setting
    assert services["scheduler"]["environment"]["CORRAL_DECISION_WORKERS"] == setting
    assert services["decider"]["command"] == ["python", "-m", "services.decider"]


STORE_DIR_FLAGS = ("-sd", "--store_dir")


@pytest.mark.parametrize("load", [load_compose, load_cluster_compose], ids=["compose", "cluster"])
def test_each_nats_server_is_given_its_store_directory_in_one_place_only(load: Callable[[], dict[str, Any]]) -> None:
    """nats.conf sets `store_dir` once, and no NATS command line adds `-sd`: nats-server 2.15 refuses a store
    directory given both ways ("Duplicate 'store_dir' configuration"), so a newer image would not start."""
    assert len(re.findall(r"^\s*store_dir:", NATS_CONF.read_text(), flags=re.MULTILINE)) == 1
    servers = {name: spec for name, spec in load()["services"].items() if spec.get("image", "").startswith("nats:")}
    assert servers
    assert {name: [flag for flag in spec["command"] if flag in STORE_DIR_FLAGS] for name, spec in servers.items()} == {
        name: [] for name in servers
    }


def test_nats_server_starts_with_the_compose_command_line_and_the_config(tmp_path: Path) -> None:
    """The compose file's NATS command line with nats.conf passes `nats-server -t` (the store directory given once)."""
    if not NATS_SERVER.exists():
        pytest.skip(f"no nats-server next to {sys.executable}")
    command = [arg.replace("/etc/nats/", f"{DEPLOY}/") for arg in load_compose()["services"]["nats"]["command"]]
    result = subprocess.run(
        [str(NATS_SERVER), "-t", *command],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env=password_environment(),
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("load", [load_compose, load_cluster_compose], ids=["compose", "cluster"])
def test_the_compose_files_use_only_keys_compose_v1_and_v2_both_read(load: Callable[[], dict[str, Any]]) -> None:
    """No top-level `name:` (docker-compose v1 refuses it; the project is named with `-p`)."""
    assert set(load()) - {"services", "volumes", "networks"} == {key for key in load() if key.startswith("x-")}
