"""The gateway's edges against a running mesh: unknown or malformed static paths are 404 without a trace or a path
of the machine, what a client sends cannot forge a line of the gateway's log, every answer forbids framing and
foreign scripts, and a gateway without a token answers only to its own names in `Host` (DNS rebinding)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from services.client import SyncClient
from services.gateway.ui import STATIC
from services.local.mesh import Mesh
from services.local.servers import free_port
from tests.integration.conftest import log_of
from tests.integration.gateway import gateway_mesh, http_base, wait_ready
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.integration]

BAD_STATIC = [
    "/static/page.css%00.js",
    "/static/page.js/x",
    "/static/.",
    "/static/..",
    "/static/..%2fapp.py",
    "/static/%2e%2e/app.py",
    "/static/",
    "/static/nope.css",
    "/static/page.js%0a",
]
FORGED = "FORGED-LINE corral.gateway ERROR forged"


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory, server_path: ServerPath) -> Iterator[Mesh]:
    with gateway_mesh(tmp_path_factory.mktemp("edges") / "mesh", server_path) as running:
        yield running


@pytest.fixture(scope="module")
def open_gateway(mesh: Mesh) -> Iterator[str]:
    """A second gateway of the same mesh without a token (the Host check applies), on its own port."""
    port = free_port()
    env = {**os.environ, **mesh.env, "CORRAL_HTTP_PORT": str(port), "CORRAL_HTTP_TOKEN": ""}
    env["CORRAL_HTTP_ALLOWED_HOSTS"] = "corral.internal"
    with (mesh.data_dir / "open-gateway.log").open("ab") as log:
        process = subprocess.Popen([sys.executable, "-m", "services.gateway"], env=env, stdout=log, stderr=log)
    try:
        wait_ready(f"http://127.0.0.1:{port}")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def http(mesh: Mesh) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=http_base(mesh), timeout=15.0) as client:
        yield client


def raw_get(base: str, path: str) -> tuple[int, str]:
    """GET `path` exactly as written (`..` and `.` kept, as `curl --path-as-is` sends them): status and body."""
    with socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])), timeout=15) as sock:
        sock.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
        answer = b""
        while data := sock.recv(65536):
            answer += data
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode()


def test_unknown_or_malformed_static_paths_are_404_without_a_trace_or_a_path(mesh: Mesh, http: httpx.Client) -> None:
    for path in BAD_STATIC:
        status, body = raw_get(http_base(mesh), path)
        assert status == 404, (path, status, body)
        assert json.loads(body)["status"] == 404, (path, body)
        assert str(STATIC.parent.parent) not in body and "Traceback" not in body, (path, body)
    for name, media in (("page.css", "text/css"), ("page.js", "text/javascript")):
        answer = http.get(f"/static/{name}")
        assert answer.status_code == 200 and answer.headers["content-type"].startswith(media)
        assert answer.content == (STATIC / name).read_bytes()
    assert "Traceback" not in log_of(mesh, "gateway")


def test_what_a_client_sends_cannot_forge_a_line_of_the_gateways_log(mesh: Mesh, http: httpx.Client) -> None:
    for path in ("/static/page.js/x", "/static/page.css%00.js", "/api/v1/nodes/x", "/nope"):
        for breaking in ("%0a", "%0d", "%0d%0a", "%85", "%e2%80%a8"):
            http.get(f"{path}{breaking}{FORGED.replace(' ', '%20')}")
    http.get("/api/v1/events", headers={b"Last-Event-ID": ("x\u2028" + FORGED).encode()})
    lines = log_of(mesh, "gateway").splitlines()
    assert not [line for line in lines if line.startswith("FORGED")], lines[-5:]


@pytest.mark.parametrize("path", ["/", "/api/v1/nodes", "/static/page.js", "/nope"])
def test_every_answer_forbids_framing_and_runs_only_the_pages_own_script_and_style(
    http: httpx.Client, path: str
) -> None:
    answer = http.get(path, headers={"Accept": "text/html"})
    assert answer.headers["x-frame-options"] == "DENY"
    policy = answer.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "style-src 'self'" in policy and "frame-ancestors 'none'" in policy


def test_a_gateway_without_a_token_answers_only_to_its_own_names(open_gateway: str, mesh: Mesh) -> None:
    port = open_gateway.rsplit(":", 1)[1]
    with httpx.Client(base_url=open_gateway, timeout=15.0) as http:
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "corral.internal", "LOCALHOST"):
            assert http.get("/api/v1/nodes", headers={"Host": host}).status_code == 200, host
        rebound = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
        for method, path in (("GET", "/api/v1/nodes"), ("GET", "/"), ("POST", "/ui/taints/add")):
            form = {"node_id": "e1", "key": "rebound", "value": "x", "effect": "NoSchedule"}
            answer = http.request(method, path, headers=rebound, data=form if method == "POST" else None)
            assert answer.status_code == 421, (method, path, answer.status_code, answer.text)
            error = answer.json()
            assert error["status"] == 421 and "evil.example" in error["error"] and "localhost" in error["error"]
    with SyncClient(mesh.nats_url, timeout=10.0) as corral:
        assert "e1" not in corral.taints()


def test_a_gateway_with_a_token_answers_to_any_host(http: httpx.Client) -> None:
    assert http.get("/api/v1/nodes", headers={"Host": "corral.example.com"}).status_code == 200
