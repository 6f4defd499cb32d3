"""The endpoints file `corral up` writes and every command reads: sources in order, and a file that cannot be trusted
(stale, corrupt, huge, hostile) said in one line and not used."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.cli.__main__ import main
from services.cli.endpoints import (
    MAX_ENDPOINTS_BYTES,
    Endpoints,
    endpoints_path,
    read_endpoints,
    remove_endpoints,
    write_endpoints,
)
from services.cli.sources import DEFAULT, DEFAULT_NATS_URL, DEFAULT_REDIS_URL, choose
from tests.support.examples import examples

NATS, REDIS = "nats://127.0.0.1:14222", "redis://127.0.0.1:16379/0"
NO_ENV: dict[str, str] = {}


def ours(**changes: object) -> Endpoints:
    """Endpoints of a `corral up` that runs (this process)."""
    fields = {"pid": os.getpid(), "nats_url": NATS, "redis_url": REDIS, "http_url": "http://127.0.0.1:18265/"}
    return Endpoints(**{**fields, **changes})  # type: ignore[arg-type]


def dead_pid() -> int:
    """The id of a process that has exited (and been reaped)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_each_value_comes_from_its_flag_else_the_environment_else_the_file_else_the_default(tmp_path: Path) -> None:
    folder = str(tmp_path)
    empty = choose(nats_url=None, redis_url=None, data_dir=folder, env=NO_ENV)
    assert (empty.nats_url.value, empty.redis_url.value, empty.warning) == (DEFAULT_NATS_URL, DEFAULT_REDIS_URL, "")
    assert empty.defaulted and empty.endpoints is None

    write_endpoints(tmp_path, ours(metrics_ports={"scheduler": 9464}))
    found = choose(nats_url=None, redis_url=None, data_dir=folder, env=NO_ENV)
    in_file = f"endpoints file {endpoints_path(tmp_path)}"
    assert (found.nats_url.value, found.nats_url.source) == (NATS, in_file)
    assert (found.redis_url.value, found.redis_url.source) == (REDIS, in_file)
    assert found.endpoints == ours(metrics_ports={"scheduler": 9464})

    env = {"CORRAL_REDIS_URL": "redis://env:1/0", "CORRAL_DATA_DIR": folder}
    found = choose(nats_url=None, redis_url=None, data_dir=None, env=env)
    assert (found.data_dir.value, found.data_dir.source) == (folder, "environment CORRAL_DATA_DIR")
    assert (found.redis_url.value, found.redis_url.source) == ("redis://env:1/0", "environment CORRAL_REDIS_URL")
    found = choose(nats_url=None, redis_url="redis://flag:2/0", data_dir=folder, env=env)
    assert (found.redis_url.value, found.redis_url.source) == ("redis://flag:2/0", "flag --redis-url")


def test_the_files_redis_is_not_used_with_another_nats(tmp_path: Path) -> None:
    write_endpoints(tmp_path, ours())
    found = choose(nats_url="nats://elsewhere:4222", redis_url=None, data_dir=str(tmp_path), env=NO_ENV)
    assert found.nats_url.source == "flag --nats-url"
    assert (found.redis_url.value, found.redis_url.source) == (DEFAULT_REDIS_URL, DEFAULT)


def test_a_stale_file_is_said_on_stderr_and_the_defaults_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pid = dead_pid()
    write_endpoints(tmp_path, ours(pid=pid))
    monkeypatch.setenv("CORRAL_DATA_DIR", str(tmp_path))
    for name in ("CORRAL_NATS_URL", "CORRAL_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    assert main(["config", "view"]) == 0
    out, err = capsys.readouterr()
    assert err == (
        f"corral config view: warning: {endpoints_path(tmp_path)} is stale: the `corral up` that wrote it (pid {pid})"
        " no longer runs; ignoring it; using the defaults\n"
    )
    assert f"nats-url   {DEFAULT_NATS_URL}" in out and "endpoints file" not in out


def test_config_view_shows_the_files_values_and_their_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("CORRAL_NATS_URL", "CORRAL_REDIS_URL", "CORRAL_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / ".corral").mkdir()
    write_endpoints(tmp_path / ".corral", ours(metrics_ports={"labels": 9465}, autoscaler=True))
    assert main(["config", "view", "--redis-url", "redis://flag:2/0"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    rows = [line.split(None, 2) for line in out.splitlines()]
    in_file = "endpoints file .corral/endpoints.json"
    assert rows == [
        ["NAME", "VALUE", "SOURCE"],
        ["data-dir", ".corral", "default"],
        ["nats-url", NATS, in_file],
        ["redis-url", "redis://flag:2/0", "flag --redis-url"],
        ["http-url", "http://127.0.0.1:18265/", in_file],
        ["metrics.labels", "9465", in_file],
        ["autoscaler", "runs", in_file],
    ]
    remove_endpoints(tmp_path / ".corral")
    remove_endpoints(tmp_path / ".corral")  # gone already: nothing to do
    assert read_endpoints(tmp_path / ".corral") is None


@pytest.mark.parametrize(
    ("make", "complaint"),
    [
        (lambda path: path.write_bytes(b"{" * (MAX_ENDPOINTS_BYTES + 1)), f"over the {MAX_ENDPOINTS_BYTES}-byte limit"),
        (os.mkfifo, "not a regular file"),
        (lambda path: path.symlink_to("/dev/zero"), "not a regular file"),
        (lambda path: path.mkdir(), "not a regular file"),
        (lambda path: path.write_bytes(b"\xff\xfe"), "invalid"),
        (lambda path: path.write_text('{"pid": "1"}'), "Expected `int`, got `str` - at `$.pid`"),
        (
            lambda path: path.write_bytes(msgspec.json.encode(ours(nats_url="http://x:1"))),
            "nats_url 'http://x:1': must be a URL like nats://host:port",
        ),
        (
            lambda path: path.write_bytes(msgspec.json.encode(ours(redis_url="redis://a\nb:1/0"))),
            "redis_url 'redis://a\\nb:1/0': must hold printable characters only",
        ),
    ],
)
def test_a_file_that_is_not_what_corral_up_writes_is_refused_in_one_line(
    tmp_path: Path, make: Callable[[Path], object], complaint: str
) -> None:
    make(endpoints_path(tmp_path))
    found = choose(nats_url=None, redis_url=None, data_dir=str(tmp_path), env=NO_ENV)
    assert found.endpoints is None and found.nats_url.source == DEFAULT
    assert found.warning.startswith(str(endpoints_path(tmp_path))) and found.warning.endswith("; ignoring it")
    assert complaint in found.warning and "\n" not in found.warning


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=20,
)
FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "pid": st.integers(-(2**40), 2**40) | st.just(os.getpid()),
        "nats_url": st.text(max_size=40) | st.just(NATS),
        "redis_url": st.text(max_size=40) | st.just(REDIS),
        "http_url": st.text(max_size=40) | st.just("http://127.0.0.1:1/"),
        "metrics_ports": st.dictionaries(st.text(max_size=10), st.integers(-5, 70_000), max_size=3) | JSON,
        "autoscaler": JSON,
    },
)


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=200) | JSON.map(msgspec.json.encode) | FIELDS.map(msgspec.json.encode))
def test_whatever_the_file_holds_it_is_used_whole_or_refused_in_one_line(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        endpoints_path(Path(folder)).write_bytes(content)
        found = choose(nats_url=None, redis_url=None, data_dir=folder, env=NO_ENV)
    if found.endpoints is None:
        assert found.warning and "\n" not in found.warning and len(found.warning) < 600 + len(folder)
        assert (found.nats_url.value, found.redis_url.value) == (DEFAULT_NATS_URL, DEFAULT_REDIS_URL)
    else:
        assert found.warning == ""
        assert (found.nats_url.value, found.redis_url.value) == (found.endpoints.nats_url, found.endpoints.redis_url)
        assert all(value.isprintable() for value in (found.nats_url.value, found.redis_url.value))
