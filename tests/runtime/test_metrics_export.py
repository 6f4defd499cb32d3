"""The runtime's metrics helpers through a real Prometheus export, in a process of their own (the meter provider
is process-wide)."""

from __future__ import annotations

import subprocess
import sys

from prometheus_client.parser import text_string_to_metric_families

from services.local.servers import free_port

SCRIPT = """
import sys, urllib.request
from services.runtime import metrics, telemetry
from services.runtime.settings import Settings
port = int(sys.argv[1])
telemetry.configure(Settings(metrics_port=port), "gateway")
metrics.gateway_request("/api/v1/actors/{id}/why", "GET", 404, 0.004)
metrics.gateway_request("/api/v1/actors/{id}/why", "GET", 404, 0.002)
print(urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode())
"""


def test_gateway_requests_are_counted_and_timed_by_route_method_and_status() -> None:
    """Two answers of one route template: a count of 2 and a histogram of 2 under the same labels."""
    port = free_port()
    command = [sys.executable, "-c", SCRIPT, str(port)]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    labels = {"route": "/api/v1/actors/{id}/why", "method": "GET", "status": "404"}
    found = {
        sample.name: sample.value
        for family in text_string_to_metric_families(done.stdout)
        for sample in family.samples
        if all(sample.labels.get(key) == value for key, value in labels.items())
    }
    assert found["corral_gateway_requests_total"] == 2
    assert found["corral_gateway_request_duration_seconds_count"] == 2
    assert 0.005 < found["corral_gateway_request_duration_seconds_sum"] < 0.007
