"""Settings from the environment (`CORRAL_*`), checked once at start with clear errors."""

from __future__ import annotations

import dataclasses
import math
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Literal, get_args
from urllib.parse import urlsplit

from services import compiled_core


class SettingsError(ValueError):
    """An environment variable holds a value the service cannot use."""


DAY_S = 86_400.0
SECONDS = (
    "heartbeat_interval",
    "heartbeat_timeout",
    "node_grace",
    "lease_ttl",
    "request_ack_wait",
    "autoscaler_interval",
)
"""Durations: finite, above 0 (0 would spin, or make a lease that never lapses), at most a day."""
COUNTS = {
    "request_batch": (1, 100_000),
    "snapshot_every": (1, 2**63),
    "max_message_bytes": (1024, 64 * 1024 * 1024),
    "seed": (0, 2**64 - 1),
    "metrics_port": (0, 65535),
    "http_port": (1, 65_535),
    "http_max_body_bytes": (1024, 64 * 1024 * 1024),
    "http_max_watchers": (1, 100_000),
    "replicas": (1, 5),
    "decision_workers": (0, 64),
}
"""Whole numbers and their bounds: a batch or snapshot period of 0 takes nothing or divides by zero, a message
limit under 1 KiB refuses every message, NATS takes no payload above 64 MiB, a seed is 64 bits, a port is 16 bits
(0: no metrics served; the gateway's HTTP port from 1), the gateway's body limit is bounded like a message, and
JetStream keeps at most 5 replicas of a stream; the gateway serves from 1 to 100,000 event streams at once;
decision workers from 0 (the scheduler decides alone) to 64."""
URL_SCHEMES = {"nats_url": ("nats", "tls", "ws", "wss"), "redis_url": ("redis", "rediss", "unix")}
OTLP_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
"""The standard OpenTelemetry variable: where spans and metrics go over OTLP/HTTP (checked here, read by the SDK)."""
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
Tracing = Literal["none", "console", "memory"]
"""Where spans go: nowhere, printed, or kept in memory (for tests)."""


@dataclass(frozen=True)
class Settings:
    """What a service or client reads from `CORRAL_<NAME>` (for example `CORRAL_NATS_URL`)."""

    nats_url: str = "nats://127.0.0.1:4222"
    """Where NATS is: one URL, or several separated by commas (the servers of a cluster)."""
    redis_url: str = "redis://127.0.0.1:6379/0"
    instance: str = f"{socket.gethostname()}-{os.getpid()}"
    heartbeat_interval: float = 1.0
    heartbeat_timeout: float = 10.0
    """A node not heard from for this long is unreachable: tainted `corral.io/unreachable:NoSchedule`, its work
    kept (ten missed heartbeats; Kubernetes waits 40-50 s, Ray declares a node dead after 5 checks 3 s apart)."""
    node_grace: float = 30.0
    """An unreachable node is declared dead after this much longer (NoExecute: its work fails and restarts elsewhere
    unless it tolerates `corral.io/unreachable`): 40 s of silence in all, above the stalls of a busy machine, below
    Kubernetes' 5 minutes of `tolerationSeconds` (a node's work waits for it)."""
    lease_ttl: float = 3.0
    request_ack_wait: float = 10.0
    request_batch: int = 256
    snapshot_every: int = 20_000
    rare_resources: tuple[str, ...] = ()
    seed: int = 0
    max_message_bytes: int = 262_144
    log_level: str = "INFO"
    tracing: Tracing = "none"
    autoscaler_interval: float = 1.0
    """How often the autoscaler decides (seconds), besides deciding when demand changes."""
    autoscaler_config: str = ""
    """The autoscaler's node types: the path of its YAML file."""
    metrics_port: int = 0
    """Where `/metrics` is served for Prometheus (0: not served)."""
    metrics_host: str = "127.0.0.1"
    """The address `/metrics` listens on (0.0.0.0 in a container)."""
    http_host: str = "127.0.0.1"
    """Where the gateway listens (0.0.0.0 in a container)."""
    http_port: int = 8265
    """The gateway's HTTP port."""
    http_token: str = dataclasses.field(default="", repr=False)
    """When set, the gateway's mutating endpoints require `Authorization: Bearer <token>`."""
    http_max_body_bytes: int = 1_048_576
    """The largest request body the gateway reads (413 above it)."""
    http_max_watchers: int = 1000
    """How many event streams (`/api/v1/events`) the gateway serves at once (503 with `Retry-After` past it); they
    share one reader of the log, so this bounds the gateway's memory, never the bus's consumers."""
    http_allowed_hosts: tuple[str, ...] = ()
    """The names a gateway without a token answers to in the `Host` header, beyond the loopback names and
    `http_host` (a browser page of another site that rebinds its name to this address is refused)."""
    replicas: int = 1
    """How many servers of a NATS cluster keep each stream and KV bucket (3 on a three-server cluster)."""
    decision_workers: int = 0
    """Decider processes that decide scheduling requests and propose them to the leading scheduler, which checks and
    appends them (0: the scheduler decides every request itself)."""
    core: str = "source"
    """Which build of the core runs: its Python sources, or `compiled`, the build `make compiled` writes (refused
    when missing, or built from other sources or by another Python)."""

    @property
    def nats_servers(self) -> list[str]:
        """`nats_url` as the list of server URLs it names."""
        return [url.strip() for url in self.nats_url.split(",") if url.strip()]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings with every `CORRAL_<FIELD>` that is set in `env` (default: the process environment)."""
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        for field in fields(cls):
            name = f"CORRAL_{field.name.upper()}"
            raw = env.get(name)
            if raw is None or raw == "":
                continue
            values[field.name] = _parse(name, raw, getattr(cls, field.name))
            _check(field.name, name, raw, values[field.name])
        endpoint = env.get(OTLP_ENDPOINT, "")
        rule = "must be one URL like http://host:4318" if "," in endpoint else ""
        rule = rule or (url_rule(endpoint, ("http", "https")) if endpoint else "")
        if rule:
            raise SettingsError(f"{OTLP_ENDPOINT} {endpoint!r}: {rule}")
        settings = cls(**values)  # type: ignore[arg-type]
        settings.check()
        return settings

    def check(self) -> None:
        """Reject values that cannot work together."""
        if self.heartbeat_timeout <= self.heartbeat_interval:
            raise SettingsError(
                f"CORRAL_HEARTBEAT_TIMEOUT {self.heartbeat_timeout}: must be above "
                f"CORRAL_HEARTBEAT_INTERVAL ({self.heartbeat_interval})"
            )
        if self.tracing not in get_args(Tracing):
            raise SettingsError(f"CORRAL_TRACING {self.tracing!r}: must be one of none, console, memory")


def _parse(name: str, raw: str, default: object) -> object:
    try:
        if isinstance(default, bool):
            return raw.lower() in ("1", "true", "yes")
        if isinstance(default, int):
            value: object = int(raw)
        elif isinstance(default, float):
            value = float(raw)
        elif isinstance(default, tuple):
            return tuple(part.strip() for part in raw.split(",") if part.strip())
        else:
            return raw
    except ValueError:
        kind = type(default).__name__
        raise SettingsError(f"{name} {raw!r}: must be a number ({kind})") from None
    if isinstance(value, int | float) and value < 0:
        raise SettingsError(f"{name} {raw!r}: must be >= 0")
    return value


def _check(field: str, name: str, raw: str, value: object) -> None:
    """Reject a value that parses but would stop, spin or hang a service later."""
    rule = ""
    if field in SECONDS:
        ok = isinstance(value, float) and math.isfinite(value) and 0 < value <= DAY_S
        rule = "" if ok else f"must be a number of seconds above 0 and at most {DAY_S:g}"
    elif field in COUNTS:
        low, high = COUNTS[field]
        rule = "" if isinstance(value, int) and low <= value <= high else f"must be a whole number from {low} to {high}"
    elif field in URL_SCHEMES:
        rule = url_rule(str(value), URL_SCHEMES[field])
    elif field == "log_level" and str(value).upper() not in LOG_LEVELS:
        rule = f"must be one of {', '.join(LOG_LEVELS)}"
    elif field == "core":
        rule = core_rule(str(value))
    if rule:
        raise SettingsError(f"{name} {raw!r}: {rule}")


def core_rule(value: str) -> str:
    """Why the core's build `value` cannot run here; "" when it can."""
    if value not in compiled_core.BUILDS:
        return f"must be one of {', '.join(compiled_core.BUILDS)}"
    return (compiled_core.unusable() or "") if value == "compiled" else ""


def url_rule(value: str, schemes: tuple[str, ...]) -> str:
    """Why `value` is not a URL (or a comma-separated list of them) of one of `schemes`; "" when it is."""
    for url in value.split(","):
        try:
            parts = urlsplit(url.strip())
            parts.port  # noqa: B018  (raises on a port that is not a number from 0 to 65535)
        except ValueError as error:
            return f"not a URL ({error})"
        if parts.scheme not in schemes or not (parts.hostname or parts.path):
            return f"must be a URL like {schemes[0]}://host:port (schemes: {', '.join(schemes)})"
    return ""
