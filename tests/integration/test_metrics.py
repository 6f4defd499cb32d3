"""Metrics end to end: each service's `/metrics` after a small workload through the bus, and an OTLP collector
stand-in receiving spans and metrics."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client.parser import text_string_to_metric_families

from schemas import FixedSizeNode, FixedSizeNodes, Queued, ScheduleRequest, VirtualCluster
from services.cli.commands.up import port_in_use
from services.cli.supervisor import last_line
from services.client import Client
from services.local.mesh import SERVICES, Mesh
from services.local.servers import LOWEST_PORT, ephemeral_ports, free_port
from tests.cli.test_commands import Lines, stop
from tests.integration.autoscaling import ACTS_WITHIN_S, autoscaled_mesh, write_config
from tests.integration.conftest import start_test_mesh, wait_ready
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
"""(sample name, its labels but the scope's) -> value."""


def scrape(port: int) -> Samples:
    """The samples `/metrics` on `port` serves now."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = frozenset((k, v) for k, v in sample.labels.items() if not k.startswith("otel_scope"))
            found[sample.name, labels] = sample.value
    return found


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample `name` with exactly `labels` (-1 when absent)."""
    return samples.get((name, frozenset(labels.items())), -1.0)


async def scraped_until(port: int, check: str, holds: Callable[[Samples], bool], timeout: float = 10.0) -> Samples:
    """Scrape `port` until `holds(samples)` is true (the services fold and decide a moment after replying)."""
    deadline = time.monotonic() + timeout
    while True:
        samples = await asyncio.to_thread(scrape, port)
        if holds(samples):
            return samples
        assert time.monotonic() < deadline, f"{check}: not seen within {timeout}s in {sorted(samples)}"
        await asyncio.sleep(0.1)


@pytest.fixture
def metered(tmp_path: Path, server_path: ServerPath) -> Iterator[Mesh]:
    """A mesh whose services serve `/metrics` on ports of their own, and snapshot every few events."""
    running = start_test_mesh(tmp_path / "mesh", server_path, settings={"CORRAL_SNAPSHOT_EVERY": "2"}, metrics_from=0)
    try:
        yield running
    finally:
        running.close()


@pytest.fixture
async def workload(metered: Mesh) -> AsyncIterator[Mesh]:
    """Two nodes; an actor placed, one pending for CPU; a virtual cluster too big to admit, queued."""
    async with Client(metered.nats_url, timeout=10.0) as client:
        await wait_ready(client)
        await client.register_node("n1", {"CPU": 2})
        await client.register_node("n2", {"CPU": 2})
        await client.submit(ScheduleRequest("fits", {"CPU": 1}))
        await client.submit(ScheduleRequest("too-big", {"CPU": 64}))
        big = VirtualCluster(fixed_size_nodes=[FixedSizeNodes([FixedSizeNode({"CPU": 3})] * 3)])
        assert isinstance(await client.create_virtual_cluster("big", big), Queued)
        yield metered


async def test_every_service_serves_its_metrics_with_plausible_values_after_a_workload(workload: Mesh) -> None:
    """Decisions by outcome and kind with their latency histograms, pending by reason, epoch and elections on the
    scheduler; the virtual-cluster queue on vclusters; events folded, lag and snapshots on every service."""
    ports = workload.metrics_ports
    assert sorted(ports) == sorted(SERVICES) and len(set(ports.values())) == len(SERVICES)
    placed = {"outcome": "placed", "kind": "submit_actor"}
    pending = {"outcome": "pending", "kind": "submit_actor"}
    scheduler = await scraped_until(
        ports["scheduler"],
        "one placed and one pending decision",
        lambda found: (
            value(found, "corral_scheduler_decisions_total", **placed) == 1
            and value(found, "corral_scheduler_decisions_total", **pending) == 1
        ),
    )
    for histogram in ("corral_scheduler_decision_duration_seconds", "corral_scheduler_request_latency_seconds"):
        assert value(scheduler, f"{histogram}_count") == 2, histogram
        assert 0 < value(scheduler, f"{histogram}_sum") < 10, histogram
        assert value(scheduler, f"{histogram}_bucket", le="10.0") == 2, histogram
    assert value(scheduler, "corral_scheduler_pending", reason="Insufficient CPU") == 1
    assert value(scheduler, "corral_leader_epoch") >= 1 and value(scheduler, "corral_leader_leading") == 1
    assert value(scheduler, "corral_leader_elections_total") == 1
    vclusters = await scraped_until(
        ports["vclusters"],
        "one cluster queued",
        lambda found: value(found, "corral_vclusters_queued", parent="root") == 1,
    )
    assert vclusters
    for name, port in ports.items():
        found = await scraped_until(
            port,
            f"{name}: a snapshot",
            lambda found: (
                value(found, "corral_snapshot_size_bytes") > 0 and value(found, "corral_events_folded_total") > 0
            ),
        )
        assert value(found, "corral_follower_sequence") > 0 and value(found, "corral_events_folded_total") > 0, name
        assert value(found, "corral_follower_lag") >= 0 and value(found, "corral_events_skipped_total") == 0, name
        assert 0 <= value(found, "corral_snapshot_age_seconds") < 60, name
        assert value(found, "corral_snapshot_failing") == 0, name
        assert value(found, "corral_snapshot_build_duration_seconds_count") >= 1, name


async def test_the_autoscaler_counts_its_election_launches_and_terminations(
    tmp_path: Path, server_path: ServerPath
) -> None:
    """An actor no node fits: one cpu-4 launched; once the actor is removed and the node idle, it is terminated."""
    config = write_config(tmp_path, idle=0.5)
    async with autoscaled_mesh(tmp_path / "mesh", server_path, config, metrics_from=0) as (mesh, client):
        await client.submit(ScheduleRequest("job", {"CPU": 1}))
        await client.wait_placed("job", timeout=ACTS_WITHIN_S)
        await client.remove_actor("job")
        found = await scraped_until(
            mesh.metrics_ports["autoscaler"],
            "one launch and one termination",
            lambda found: value(found, "corral_autoscaler_terminations_total", node_type="cpu-4") == 1,
            timeout=ACTS_WITHIN_S,
        )
        assert value(found, "corral_autoscaler_launches_total", node_type="cpu-4") == 1
        assert value(found, "corral_leader_elections_total") == 1


class Collector(ThreadingHTTPServer):
    """An OTLP/HTTP collector stand-in: keeps each request body by path."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Receive)
        self.received: dict[str, list[bytes]] = {}
        self.lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        """What `OTEL_EXPORTER_OTLP_ENDPOINT` names."""
        return f"http://127.0.0.1:{self.server_address[1]}"

    def bodies(self, path: str) -> list[bytes]:
        """What was posted to `path` so far."""
        with self.lock:
            return list(self.received.get(path, []))


class _Receive(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.server.lock:
            self.server.received.setdefault(self.path, []).append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def collector() -> Iterator[Collector]:
    """A collector stand-in on a free loopback port."""
    server = Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


async def test_spans_and_metrics_reach_an_otlp_collector(
    tmp_path: Path, server_path: ServerPath, collector: Collector
) -> None:
    """With OTEL_EXPORTER_OTLP_ENDPOINT set (and no /metrics port), each service posts its spans and metrics."""
    otlp = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
        "OTEL_METRIC_EXPORT_INTERVAL": "300",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    mesh = start_test_mesh(tmp_path / "mesh", server_path, settings=otlp)
    try:
        async with Client(mesh.nats_url, timeout=10.0) as client:
            await wait_ready(client)
            await client.register_node("n1", {"CPU": 2})
            await client.submit(ScheduleRequest("a1", {"CPU": 1}))
            deadline = time.monotonic() + 15
            while not (_services_of_spans(collector) >= {"labels", "scheduler"} and _decisions_exported(collector)):
                assert time.monotonic() < deadline, (collector.received.keys(), _services_of_spans(collector))
                await asyncio.sleep(0.1)
    finally:
        mesh.close()


def _services_of_spans(collector: Collector) -> set[str]:
    """The `service.name` of every resource that sent spans."""
    names = set()
    for body in collector.bodies("/v1/traces"):
        request = ExportTraceServiceRequest.FromString(body)
        for spans in request.resource_spans:
            if any(scope.spans for scope in spans.scope_spans):
                names |= {a.value.string_value for a in spans.resource.attributes if a.key == "service.name"}
    return names


def _decisions_exported(collector: Collector) -> bool:
    """Whether the scheduler exported a decision count of at least 1."""
    for body in collector.bodies("/v1/metrics"):
        for resource in ExportMetricsServiceRequest.FromString(body).resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == "corral.scheduler.decisions" and any(
                        point.as_int >= 1 for point in metric.sum.data_points
                    ):
                        return True
    return False


def _free_run(length: int) -> int:
    """The first of `length` consecutive ports nothing listens on now, below the kernel's ephemeral range: a port
    inside it can be taken at any moment as the local end of an outgoing connection (the services' own to NATS
    and Redis), and the service meant to listen there would then fail to start."""
    low = ephemeral_ports()[0]
    runs = list(range(max(low - 4000, LOWEST_PORT), low - length, length))
    random.shuffle(runs)  # another test worker looking at once starts elsewhere
    for first in runs:
        if not any(port_in_use(first + step) for step in range(length)):
            return first
    raise AssertionError(f"no {length} free consecutive ports below the ephemeral range (from {low})")


def test_corral_up_gives_each_service_its_own_metrics_port_and_prints_it(tmp_path: Path) -> None:
    """CORRAL_METRICS_PORT=N: the four services on N, N+1, ...; each line printed serves that service's metrics."""
    first = _free_run(len(SERVICES) + 1)  # and the gateway's after them
    command = [sys.executable, "-m", "services.cli", "up", "--nats-port", str(free_port())]
    command += ["--http-port", str(free_port())]
    up = subprocess.Popen(
        [*command, "--data-dir", str(tmp_path / "corral")],
        env={**os.environ, "CORRAL_METRICS_PORT": str(first), "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = Lines(up)
        lines.wait_for("Corral is up")
        for step, service in enumerate(SERVICES):
            url = f"http://127.0.0.1:{first + step}/metrics"
            assert lines.wait_for(f"metrics of {service}:").split()[-1] == url
            assert value(scrape(first + step), "corral_events_folded_total") >= 0, service
        assert stop(up, signal.SIGTERM)[0] == 0
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()


def test_a_metrics_port_already_taken_stops_corral_up_with_the_services_own_reason(tmp_path: Path) -> None:
    """The service that cannot listen exits; `corral up` stops the mesh and says why in one line: the service's
    last log line (its own reason, naming the variable and the port) and where its log is."""
    first = _free_run(len(SERVICES) + 1)
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the port may linger from an earlier test
        taken.bind(("127.0.0.1", first + 1))
        taken.listen()
        command = [sys.executable, "-m", "services.cli", "up", "--nats-port", str(free_port())]
        command += ["--http-port", str(free_port()), "--data-dir", str(tmp_path / "corral")]
        env = {**os.environ, "CORRAL_METRICS_PORT": str(first)}
        up = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=90)
    assert up.returncode == 1, up.stderr
    error = up.stderr.splitlines()[-1]
    assert error.startswith("corral up: error: the ") and " service exited with code 2: " in error, error
    assert f"CORRAL_METRICS_PORT {first + 1}: cannot serve /metrics on 127.0.0.1:{first + 1}" in error, error
    assert f"(its log: {tmp_path / 'corral'}/" in error, error


@pytest.mark.parametrize(
    ("content", "last"),
    [
        (b"", ""),
        (b"first\nsecond\n\n  \n", "second"),
        (b"x" * 10_000 + b"\nend \xff\n", "end \ufffd"),
        (b"y" * 10_000, "y" * 300),
    ],
)
def test_the_last_line_of_a_log_is_its_last_non_empty_one_cut_to_300_characters(
    tmp_path: Path, content: bytes, last: str
) -> None:
    (tmp_path / "service.log").write_bytes(content)
    assert last_line(tmp_path / "service.log") == last
    assert last_line(tmp_path / "missing.log") == ""


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=9_000) | st.text(max_size=600).map(str.encode))
def test_any_log_gives_one_line_of_at_most_300_characters(tmp_path: Path, content: bytes) -> None:
    """Whatever a service wrote (invalid UTF-8, NULs, line breaks of every kind, nothing): one line for `corral up`'s
    report, never more than 300 characters, with no line break in it."""
    (tmp_path / "service.log").write_bytes(content)
    last = last_line(tmp_path / "service.log")
    assert len(last) <= 300 and last == last.strip() and len(last.splitlines()) <= 1
