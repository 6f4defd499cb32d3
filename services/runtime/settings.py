"""Settings from the environment (`CORRAL_*`), checked once at start with clear errors."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, fields


class SettingsError(ValueError):
    """An environment variable holds a value the service cannot use."""


@dataclass(frozen=True)
class Settings:
    """What a service or client reads from `CORRAL_<NAME>` (for example `CORRAL_NATS_URL`)."""

    nats_url: str = "nats://127.0.0.1:4222"
    redis_url: str = "redis://127.0.0.1:6379/0"
    instance: str = f"{socket.gethostname()}-{os.getpid()}"
    heartbeat_interval: float = 1.0
    heartbeat_timeout: float = 5.0
    lease_ttl: float = 3.0
    request_ack_wait: float = 10.0
    request_batch: int = 256
    snapshot_every: int = 20_000
    rare_resources: tuple[str, ...] = ()
    seed: int = 0
    max_message_bytes: int = 262_144
    log_level: str = "INFO"
    tracing: str = "none"

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
        if self.tracing not in ("none", "console", "memory"):
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
