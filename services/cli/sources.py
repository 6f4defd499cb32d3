"""Which mesh a command talks to, and where each value comes from: a flag, the environment, the endpoints file of a
running `corral up`, or the default (as `kubectl config view` tells)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from services.cli.endpoints import Endpoints, EndpointsError, endpoints_path, read_endpoints
from services.runtime.settings import Settings

DEFAULT_DATA_DIR = ".corral"
"""`corral up`'s data directory, and where commands look for its endpoints file, unless told otherwise."""
DATA_DIR_ENV = "CORRAL_DATA_DIR"
NATS_URL_ENV = "CORRAL_NATS_URL"
REDIS_URL_ENV = "CORRAL_REDIS_URL"
DEFAULT_NATS_URL = Settings.nats_url
DEFAULT_REDIS_URL = Settings.redis_url
DEFAULT = "default"


@dataclass(frozen=True)
class Sourced:
    """A value and where it came from."""

    value: str
    source: str


@dataclass(frozen=True)
class Chosen:
    """What a command uses: the data directory, NATS and Redis, and the endpoints file read (if one was used), or
    `warning`, why a file there was not."""

    data_dir: Sourced
    nats_url: Sourced
    redis_url: Sourced
    endpoints: Endpoints | None
    warning: str

    @property
    def defaulted(self) -> bool:
        """Whether NATS or Redis fell back to its default (then an unusable endpoints file is worth a warning)."""
        return DEFAULT in (self.nats_url.source, self.redis_url.source)


def file_source(data_dir: str) -> str:
    """How the endpoints file of `data_dir` is named as a source."""
    return f"endpoints file {endpoints_path(Path(data_dir))}"


def pick(flag: str | None, flag_name: str, env: Mapping[str, str], env_name: str) -> Sourced | None:
    """The flag's value, else the environment variable's (when set and not empty), else None."""
    if flag:
        return Sourced(flag, f"flag {flag_name}")
    if env.get(env_name):
        return Sourced(env[env_name], f"environment {env_name}")
    return None


def choose(
    *, nats_url: str | None, redis_url: str | None, data_dir: str | None, env: Mapping[str, str] = os.environ
) -> Chosen:
    """Each value from its flag (given: not None), else its `CORRAL_*` variable, else the endpoints file in the data
    directory, else the default.

    The file's Redis URL is used only with its own NATS URL (a mesh named by flag or environment may be another)."""
    folder = pick(data_dir, "--data-dir", env, DATA_DIR_ENV) or Sourced(DEFAULT_DATA_DIR, DEFAULT)
    endpoints, warning = None, ""
    try:
        endpoints = read_endpoints(Path(folder.value))
    except EndpointsError as error:
        warning = str(error)
    in_file = file_source(folder.value)
    nats = pick(nats_url, "--nats-url", env, NATS_URL_ENV) or (
        Sourced(endpoints.nats_url, in_file) if endpoints else Sourced(DEFAULT_NATS_URL, DEFAULT)
    )
    own = endpoints is not None and nats.value == endpoints.nats_url
    redis = pick(redis_url, "--redis-url", env, REDIS_URL_ENV) or (
        Sourced(endpoints.redis_url, in_file) if endpoints and own else Sourced(DEFAULT_REDIS_URL, DEFAULT)
    )
    return Chosen(folder, nats, redis, endpoints, warning)
