"""What a user of the deployment sees from the host: the `corral` CLI on the published NATS ports, the gateway's
page and `/readyz` on 8265, and each service's `/metrics` (port 9464, at its container's address)."""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.compose.shell import ComposeTestError, run

ROOT = Path(__file__).resolve().parents[2]
GATEWAY = "http://localhost:8265"
METRICS_PORT = 9464
HTTP_S = 10.0
LEADING = "corral_leader_leading"


def client_url(ports: list[int], user: str = "client") -> str:
    """The NATS URL a user passes, as deploy/README.md says: `user:password@localhost:PORT` for each server."""
    password = os.environ.get(f"CORRAL_{user.upper()}_PASSWORD", f"{user}-dev")
    return ",".join(f"nats://{user}:{password}@localhost:{port}" for port in ports)


def http_get(url: str) -> tuple[int, str]:
    """Status and body of a GET; a refused or cut connection is a ComposeTestError."""
    try:
        with urllib.request.urlopen(url, timeout=HTTP_S) as response:
            return int(response.status), response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode(errors="replace")
    except (OSError, urllib.error.URLError) as error:
        raise ComposeTestError(f"GET {url}: {error}") from error


def leading(metrics: str) -> bool:
    """Whether a scheduler's /metrics says it leads (`corral_leader_leading... 1`)."""
    for line in metrics.splitlines():
        if line.startswith(LEADING):
            return float(line.rsplit(" ", 1)[1]) == 1.0
    raise ComposeTestError(f"no {LEADING} in the scheduler's /metrics")


@dataclass
class User:
    """The host's `corral` CLI (this venv, this checkout) pointed at the deployment's published NATS ports."""

    nats_url: str

    def corral(self, *args: str, timeout: float = 20.0) -> str:
        """`corral ARGS --nats-url URL`; a non-zero exit is a ComposeTestError with its output."""
        env = {**os.environ, "PYTHONPATH": str(ROOT), "CORRAL_NATS_URL": self.nats_url}
        command = [sys.executable, "-m", "services.cli", *args, "--timeout", f"{timeout:g}"]
        return run(command, timeout=timeout + 30, env=env).stdout

    def listing(self, kind: str) -> list[dict[str, Any]]:
        """`corral get KIND -o json`."""
        items = json.loads(self.corral("get", kind, "-o", "json"))
        return list(items["items"] if isinstance(items, dict) else items)

    def node_count(self) -> int:
        """How many nodes the mesh knows."""
        return len(self.listing("nodes"))

    def placements(self, prefix: str) -> dict[str, str | None]:
        """Where each actor whose id starts with `prefix` runs (None: it waits)."""
        actors = self.listing("actors")
        return {actor["actor_id"]: actor.get("node_id") for actor in actors if actor["actor_id"].startswith(prefix)}

    def submit(self, actor: str, timeout: float = 60.0) -> str:
        """`corral submit ACTOR --wait`: the node it was placed on."""
        output = self.corral("submit", actor, "--cpu", "100m", "--wait", timeout=timeout)
        placed = [line for line in output.splitlines() if line.startswith(f"{actor} placed on ")]
        if not placed:
            raise ComposeTestError(f"corral submit {actor} --wait did not place it:\n{output}")
        return placed[-1].removeprefix(f"{actor} placed on ").strip()

    def ready(self) -> bool | None:
        """True once the gateway's /readyz answers 200 (every service answers)."""
        status, body = http_get(f"{GATEWAY}/readyz")
        if status != 200:
            raise ComposeTestError(f"/readyz answered {status}: {body[:500]}")
        return True

    def page(self) -> None:
        """The gateway's web page loads."""
        status, body = http_get(f"{GATEWAY}/")
        if status != 200 or "<html" not in body.lower():
            raise ComposeTestError(f"the web page at {GATEWAY}/ answered {status}: {body[:300]}")


def metrics(address: str) -> str:
    """A service's /metrics, read at its container's address as Prometheus would."""
    status, body = http_get(f"http://{address}:{METRICS_PORT}/metrics")
    if status != 200 or "corral_" not in body:
        raise ComposeTestError(f"/metrics at {address}:{METRICS_PORT} answered {status} without corral_ metrics")
    return body
