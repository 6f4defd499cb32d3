"""How the integration tests get their servers: the Docker ping, the CORRAL_TEST_SERVERS override, the log wait."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.local import servers
from services.local.servers import LOWEST_PORT, LocalServer, ServerError, ephemeral_ports, free_port, redis_server
from tests.support.examples import examples
from tests.support.servers import (
    NATS_IMAGE,
    REDIS_IMAGE,
    SERVERS_ENV,
    ContainerServer,
    choose_servers,
    docker_engine_answers,
    nats_container,
    redis_container,
    wait_for_log,
)

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer


def no_ping() -> bool:
    """A ping that must not happen."""
    raise AssertionError("the override should have spared the ping")


def test_a_closed_loopback_port_is_no_engine_and_says_so_quickly(monkeypatch: pytest.MonkeyPatch) -> None:
    """DOCKER_HOST at a port nothing listens on: False, well within the 2 s timeout, and no exception."""
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{free_port()}")
    monkeypatch.delenv("DOCKER_TLS_VERIFY", raising=False)
    monkeypatch.delenv("DOCKER_CERT_PATH", raising=False)
    started = time.monotonic()
    assert docker_engine_answers() is False
    assert time.monotonic() - started < 2.0


def test_a_missing_socket_is_no_engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """DOCKER_HOST at a unix socket that does not exist: False."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'docker.sock'}")
    assert docker_engine_answers(timeout=0.5) is False


def test_without_an_engine_the_choice_is_the_local_binaries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing forced and nothing answers: the local path, with the reason."""
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{free_port()}")
    monkeypatch.delenv(SERVERS_ENV, raising=False)
    assert choose_servers() == ("local", "no Docker engine answered a ping")


@pytest.mark.parametrize("value", ["", "auto", " AUTO "])
def test_unforced_the_ping_and_the_images_decide(value: str) -> None:
    """Unset, empty or auto: docker exactly when the engine answers and holds (or pulls) the images."""
    assert choose_servers({SERVERS_ENV: value}, ping=lambda: True, missing=list)[0] == "docker"
    assert choose_servers({SERVERS_ENV: value}, ping=lambda: False)[0] == "local"


def test_an_engine_without_the_images_and_no_registry_means_the_local_binaries() -> None:
    """An engine that answers but cannot get nats:2.11 (no registry in reach): the local path, saying why."""
    assert choose_servers({}, ping=lambda: True, missing=lambda: ["nats:2.11"]) == (
        "local",
        "a Docker engine answered a ping, but it has no nats:2.11 and could not pull it",
    )


def test_local_forced_skips_the_ping() -> None:
    """CORRAL_TEST_SERVERS=local: the local binaries, without asking any engine."""
    assert choose_servers({SERVERS_ENV: "local"}, ping=no_ping) == ("local", f"{SERVERS_ENV}=local")


def test_docker_forced_needs_an_engine() -> None:
    """CORRAL_TEST_SERVERS=docker: containers when the engine answers, a clear error when it does not."""
    assert choose_servers({SERVERS_ENV: "docker"}, ping=lambda: True) == ("docker", f"{SERVERS_ENV}=docker")
    with pytest.raises(ServerError, match="no Docker engine answers"):
        choose_servers({SERVERS_ENV: "docker"}, ping=lambda: False)


def test_the_override_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an explicit mapping the process environment counts."""
    monkeypatch.setenv(SERVERS_ENV, "local")
    assert choose_servers(ping=no_ping)[0] == "local"


def test_an_unknown_override_is_refused() -> None:
    """A typo does not silently fall back to one path."""
    with pytest.raises(ServerError, match="use local, docker or auto"):
        choose_servers({SERVERS_ENV: "podman"}, ping=no_ping)


def test_the_log_wait_counts_starts() -> None:
    """After a restart the ready line of the previous start does not count."""
    lines = [b"Server is ready\n"]

    def logs() -> bytes:
        lines.append(b"starting\n")
        if len(lines) == 4:
            lines.append(b"Server is ready\n")
        return b"".join(lines)

    wait_for_log("nats", "Server is ready", 1, lambda: b"Server is ready\n", lambda: True)
    wait_for_log("nats", "Server is ready", 2, logs, lambda: True, timeout=5)
    assert b"".join(lines).count(b"Server is ready") == 2


def test_the_log_wait_gives_up_on_a_stopped_or_silent_server() -> None:
    """A container that exits, or never logs the line, is an error that names the server."""
    with pytest.raises(ServerError, match="nats stopped before"):
        wait_for_log("nats", "Server is ready", 1, lambda: b"", lambda: False)
    with pytest.raises(ServerError, match="nats did not log"):
        wait_for_log("nats", "Server is ready", 1, lambda: b"", lambda: True, timeout=0.2)


def test_a_local_server_has_the_operations_of_a_container_server(tmp_path: Path) -> None:
    """start, stop, start again on the same port, close: what the fixtures use on either path."""
    server: LocalServer = redis_server(tmp_path / "redis")
    port = server.port
    try:
        server.start()
        server.stop()
        server.start()
        assert server.port == port
        assert server.process is not None
        assert server.process.poll() is None
    finally:
        server.close()
    assert server.process is not None
    assert server.process.poll() is not None


class FakeWrapped:
    """The docker-py container under a fake testcontainer: a status and a log that grows with each start."""

    def __init__(self) -> None:
        self.status = "created"
        self.log = b""
        self.stops = 0

    def start(self) -> None:
        self.status = "running"
        self.log += b"[1] Server is ready\n"

    def stop(self, timeout: int) -> None:
        assert timeout == 5
        self.status = "exited"
        self.stops += 1

    def logs(self) -> bytes:
        return self.log

    def reload(self) -> None:
        """docker-py refreshes `status` here; the fake's is always current."""


class FakeContainer:
    """Just what ContainerServer uses of a testcontainers DockerContainer, without an engine."""

    def __init__(self, host: str = "localhost") -> None:
        self.host = host
        self.wrapped = FakeWrapped()
        self.removed = False

    def start(self) -> FakeContainer:
        self.wrapped.start()
        return self

    def get_container_host_ip(self) -> str:
        return self.host

    def get_wrapped_container(self) -> FakeWrapped:
        return self.wrapped

    def stop(self) -> None:
        self.removed = True


def container_server(tmp_path: Path, fake: FakeContainer) -> ContainerServer:
    """A ContainerServer around a fake container."""
    return ContainerServer(
        "nats-server (fake)",
        ["-js"],
        free_port(),
        tmp_path / "nats-server.log",
        container=cast("DockerContainer", fake),
        ready_log="Server is ready",
    )


def test_a_container_server_restarts_in_place_and_keeps_its_log_when_closed(tmp_path: Path) -> None:
    """start, stop, start again (the same container and port), close: the log is kept, the container removed."""
    fake = FakeContainer()
    server = container_server(tmp_path, fake)
    assert server.start() is server
    server.stop()
    server.start()
    assert (server.starts, fake.wrapped.stops, fake.wrapped.status) == (2, 1, "running")
    server.close()
    server.close()
    server.stop()
    assert fake.removed
    assert fake.wrapped.stops == 1
    assert (tmp_path / "nats-server.log").read_bytes().count(b"Server is ready") == 2
    with pytest.raises(ServerError, match="was closed"):
        server.start()


def test_a_container_server_refuses_an_engine_that_publishes_elsewhere(tmp_path: Path) -> None:
    """The mesh addresses 127.0.0.1: a remote engine is a clear error (and the container is removed)."""
    fake = FakeContainer(host="10.0.0.7")
    with pytest.raises(ServerError, match=f"{SERVERS_ENV}=local"):
        container_server(tmp_path, fake).start()
    assert fake.removed


def test_the_containers_are_published_on_the_given_host_ports(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A fixed host port (not one Docker picks) is what lets a restarted container keep its address."""
    monkeypatch.setattr("testcontainers.core.container.DockerClient", lambda **_: object())
    nats = nats_container(tmp_path / "nats", 14222)
    redis = redis_container(tmp_path / "redis", 16379)
    assert nats.container.image.endswith(NATS_IMAGE)
    assert redis.container.image.endswith(REDIS_IMAGE)
    assert (nats.container.ports, nats.port) == ({"4222": 14222}, 14222)
    assert (redis.container.ports, redis.port) == ({"6379": 16379}, 16379)
    assert nats.command[:3] == ["-js", "-sd", "/data/jetstream"]


def test_a_free_port_lies_below_the_ephemeral_range_and_nothing_is_bound_to_it() -> None:
    """Outgoing connections take their local ports from the ephemeral range: a port chosen there could be taken
    before its server listens (a CI run lost a service that way)."""
    low, _high = ephemeral_ports()
    for _ in range(20):
        port = free_port()
        assert LOWEST_PORT <= port < low
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))


def test_a_port_taken_is_not_chosen(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "range").write_text(f"{LOWEST_PORT + 2} 60999\n")
    monkeypatch.setattr(servers, "ephemeral_ports", lambda: ephemeral_ports(tmp_path / "range"))
    monkeypatch.setattr(servers, "CLAIM_SECONDS", 0.0)  # handed out again at once
    with socket.socket() as taken:
        try:
            taken.bind(("127.0.0.1", LOWEST_PORT))
        except OSError:
            pytest.skip(f"port {LOWEST_PORT} is in use on this machine")
        assert {free_port() for _ in range(20)} == {LOWEST_PORT + 1}


def test_a_port_handed_out_is_not_handed_out_again_while_its_server_may_be_starting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Another process (a parallel test worker) once started its server on a port handed out a moment before to a
    cluster's third server, which then failed to listen; a claim older than `CLAIM_SECONDS` is given up."""
    monkeypatch.setattr(servers, "CLAIMS", tmp_path / "claims")
    (tmp_path / "range").write_text(f"{LOWEST_PORT + 40} 60999\n")
    monkeypatch.setattr(servers, "ephemeral_ports", lambda: ephemeral_ports(tmp_path / "range"))
    monkeypatch.setattr(servers, "_bindable", lambda _port: True)  # the claims alone decide here
    below = set(range(LOWEST_PORT, LOWEST_PORT + 40))
    handed = [free_port() for _ in range(40)]
    assert set(handed) == below  # each once
    assert sorted(int(mark.name) for mark in (tmp_path / "claims").iterdir()) == sorted(handed)
    assert free_port() >= LOWEST_PORT + 40  # every port below the range claimed: the kernel's choice
    for mark in (tmp_path / "claims").iterdir():
        os.utime(mark, (0, 0))  # every claim long past
    assert free_port() in below


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    shape=st.sampled_from(["file instead of the folder", "folder per port", "future claims", "garbage claims"]),
    content=st.binary(max_size=64),
)
def test_a_hostile_claims_folder_never_stops_free_port_from_handing_out_a_port_below_the_range(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory, shape: str, content: bytes
) -> None:
    """Whatever is in the claims folder's place (a file, folders named as ports, claims dated in the future, stale
    files of any content), a port below the ephemeral range is still handed out, and stale claims are taken over
    one port each."""
    root = tmp_path_factory.mktemp("claims")
    claims = root / "claims"
    candidates = range(LOWEST_PORT, LOWEST_PORT + 8)
    if shape == "file instead of the folder":
        claims.write_bytes(content)
    else:
        claims.mkdir()
        for port in candidates:
            mark = claims / str(port)
            if shape == "folder per port":
                mark.mkdir()
            else:
                mark.write_bytes(content)
                stamp = time.time() + 10**6 if shape == "future claims" else 0.0  # both stale: ahead of or long past
                os.utime(mark, (stamp, stamp))
    monkeypatch.setattr(servers, "CLAIMS", claims)
    monkeypatch.setattr(servers, "_bindable", lambda _port: True)
    monkeypatch.setattr(servers, "ephemeral_ports", lambda: (LOWEST_PORT + 8, 60_999))
    first, second = free_port(), free_port()
    assert first in candidates
    if shape in ("future claims", "garbage claims"):  # stale claims: taken over, one port each
        assert second in candidates and second != first


@pytest.mark.parametrize("text", ["", "junk", "1 2 3", "\xff"])
def test_an_unreadable_ephemeral_range_is_linuxs_default_and_no_room_below_it_is_the_kernels_choice(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str
) -> None:
    (tmp_path / "range").write_text(text, encoding="latin-1")
    assert servers.ephemeral_ports(tmp_path / "range") == (32_768, 60_999)
    assert servers.ephemeral_ports(tmp_path / "missing") == (32_768, 60_999)
    monkeypatch.setattr(servers, "ephemeral_ports", lambda: (LOWEST_PORT, 60_999))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", free_port()))


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.binary(max_size=40)
    | st.tuples(st.integers(-(2**70), 2**70), st.integers(-(2**70), 2**70)).map(lambda p: b"%d %d" % p)
    | st.tuples(st.integers(0, 70_000), st.integers(0, 70_000)).map(lambda p: b"%d\t%d\n" % p)
)
def test_any_ephemeral_range_file_gives_ports_and_a_free_port_that_binds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: bytes
) -> None:
    """Whatever the range file holds (garbage, huge or negative numbers, a range upside down or past 65535): two
    ports, the first at most the second, and `free_port` still gives a port that binds (before, a first port past
    65535 made it raise OverflowError)."""
    (tmp_path / "range").write_bytes(content)
    low, high = ephemeral_ports(tmp_path / "range")
    assert 1 <= low <= high <= 65_535
    monkeypatch.setattr(servers, "ephemeral_ports", lambda: (low, high))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", free_port()))
