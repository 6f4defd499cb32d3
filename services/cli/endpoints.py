"""The endpoints file: where a `corral up` mesh listens, written in its data directory for `corral` commands to find.

The file is a boundary: whatever it holds (corrupt, huge, not a regular file, values that are no URLs, a `corral up`
that no longer runs) is refused with one line saying why, never a traceback.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Annotated

import msgspec

from services.runtime.settings import URL_SCHEMES, url_rule

ENDPOINTS_FILE = "endpoints.json"
"""In the data directory, while `corral up` runs."""
MAX_ENDPOINTS_BYTES = 64 * 1024
"""A larger file is refused unread."""

Port = Annotated[int, msgspec.Meta(ge=1, le=65_535)]
Url = Annotated[str, msgspec.Meta(min_length=1, max_length=1024)]
ServiceName = Annotated[str, msgspec.Meta(pattern="^[a-z0-9][a-z0-9-]{0,63}$")]


class Endpoints(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    """What `corral up` (process `pid`) serves: NATS, Redis, the HTTP API, each service's `/metrics` port."""

    pid: Annotated[int, msgspec.Meta(ge=1, le=2**31 - 1)]
    nats_url: Url
    redis_url: Url
    http_url: Url
    metrics_ports: Annotated[dict[ServiceName, Port], msgspec.Meta(max_length=256)] = {}
    autoscaler: bool = False


class EndpointsError(Exception):
    """The endpoints file cannot be used; the text (one line) says which file and why."""


URL_FIELDS = {"nats_url": URL_SCHEMES["nats_url"], "redis_url": URL_SCHEMES["redis_url"], "http_url": ("http",)}


def endpoints_path(data_dir: Path) -> Path:
    """Where the endpoints file of `data_dir` is."""
    return data_dir / ENDPOINTS_FILE


def write_endpoints(data_dir: Path, endpoints: Endpoints) -> Path:
    """Write the file whole (a reader never sees half of it) and return its path."""
    path = endpoints_path(data_dir)
    partial = path.with_suffix(".json.partial")
    partial.write_bytes(msgspec.json.format(msgspec.json.encode(endpoints)) + b"\n")
    partial.replace(path)
    return path


def remove_endpoints(data_dir: Path) -> None:
    """Remove the file (`corral up` stops); nothing when it is gone already."""
    with contextlib.suppress(FileNotFoundError):
        endpoints_path(data_dir).unlink()


def read_endpoints(data_dir: Path) -> Endpoints | None:
    """The endpoints of the `corral up` that runs on `data_dir`; None when there is no file; `EndpointsError` when
    the file cannot be used (unreadable, too large, not JSON of the right shape, or its `corral up` is gone)."""
    path = endpoints_path(data_dir)
    data = _read_bytes(path)
    if data is None:
        return None
    try:
        endpoints = msgspec.json.decode(data, type=Endpoints)
    except msgspec.DecodeError as error:  # ValidationError too: it names the field
        raise EndpointsError(f"{path}: {one_line(str(error))}; ignoring it") from None
    for name, schemes in URL_FIELDS.items():
        value = getattr(endpoints, name)
        rule = "must hold printable characters only" if not value.isprintable() else url_rule(value, schemes)
        if rule:
            raise EndpointsError(f"{path}: {name} {one_line(repr(value))}: {rule}; ignoring it")
    if not process_runs(endpoints.pid):
        raise EndpointsError(
            f"{path} is stale: the `corral up` that wrote it (pid {endpoints.pid}) no longer runs; ignoring it"
        )
    return endpoints


def _read_bytes(path: Path) -> bytes | None:
    """At most `MAX_ENDPOINTS_BYTES` of a regular file (a FIFO or device is refused, never waited on)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise EndpointsError(f"{path}: cannot read it ({error.strerror or error}); ignoring it") from None
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise EndpointsError(f"{path}: not a regular file; ignoring it")
    with os.fdopen(descriptor, "rb") as file:
        try:
            data = file.read(MAX_ENDPOINTS_BYTES + 1)
        except OSError as error:
            raise EndpointsError(f"{path}: cannot read it ({error.strerror or error}); ignoring it") from None
    if len(data) > MAX_ENDPOINTS_BYTES:
        raise EndpointsError(f"{path}: over the {MAX_ENDPOINTS_BYTES}-byte limit; ignoring it")
    return data


def process_runs(pid: int) -> bool:
    """Whether process `pid` exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def one_line(text: str, limit: int = 300) -> str:
    """`text` with every character that is not printable escaped, cut to `limit` characters."""
    escaped = "".join(char if char.isprintable() else ascii(char)[1:-1] for char in text)
    return escaped if len(escaped) <= limit else escaped[: limit - 3] + "..."
