"""Fuzz the telemetry variables: `CORRAL_METRICS_PORT` and `OTEL_EXPORTER_OTLP_ENDPOINT` give settings a service
can serve with, or one SettingsError line naming the variable and its value; a service started with a bad one, or
on a port already taken, says so in one line and exits 2."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from urllib.parse import urlsplit

from hypothesis import given, settings
from hypothesis import strategies as st

from services.runtime.settings import OTLP_ENDPOINT, Settings, SettingsError
from tests.support.examples import examples

PORT = "CORRAL_METRICS_PORT"

ports = st.one_of(
    st.sampled_from(["0", "9464", "65535", "65536", "-1", "1e3", "0x10", "9464.0", " ", "nan", str(2**64), "٩٤٦٤"]),
    st.integers(min_value=-(2**20), max_value=2**20).map(str),
    st.text(max_size=8),
)
endpoints = st.one_of(
    st.sampled_from(["http://127.0.0.1:4318", "https://collector:4318", "collector:4318", "grpc://h:4317"]),
    st.sampled_from(["http://", "http://h:99999", "http://a,http://b", "ftp://h", "http://h:port"]),
    st.text(max_size=20),
)


@settings(max_examples=examples(300), deadline=None)
@given(ports, endpoints)
def test_any_metrics_port_and_otlp_endpoint_give_usable_settings_or_one_clear_error(port: str, endpoint: str) -> None:
    """A port from 0 to 65535 and an http(s) URL with a host, or one line naming the variable and its value."""
    env = {PORT: port, OTLP_ENDPOINT: endpoint}
    try:
        found = Settings.from_env(env)
    except SettingsError as error:
        message = str(error)
        assert "\n" not in message
        assert (PORT in message and repr(port) in message) or (OTLP_ENDPOINT in message and repr(endpoint) in message)
        return
    assert 0 <= found.metrics_port <= 65535
    if endpoint:
        parts = urlsplit(endpoint)
        assert parts.scheme in ("http", "https") and parts.hostname and "," not in endpoint
        assert parts.port is None or 0 <= parts.port <= 65535


def _start_labels(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "services.labels"]
    return subprocess.run(command, check=False, env={**os.environ, **env}, capture_output=True, text=True, timeout=20)


@settings(max_examples=3, deadline=None)
@given(st.sampled_from([(PORT, "65536"), (PORT, "-1"), (PORT, "http"), (OTLP_ENDPOINT, "collector:4318")]))
def test_a_service_started_with_a_bad_telemetry_variable_says_so_and_exits_2(bad: tuple[str, str]) -> None:
    """`python -m services.labels`: exit 2, one line on stderr naming the variable, no traceback."""
    name, raw = bad
    done = _start_labels({name: raw})
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(lines) == 1 and name in lines[0] and raw in lines[0] and "Traceback" not in done.stderr, done.stderr


def test_a_service_whose_metrics_port_is_taken_says_so_and_exits_2() -> None:
    """Something already listens on the port: the service stops at start, before it joins the bus."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _start_labels({PORT: str(port), "CORRAL_NATS_URL": "nats://127.0.0.1:1"})
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(lines) == 1 and f"{PORT} {port}: cannot serve /metrics" in lines[0], done.stderr
