"""The OpenAPI document is the API: every route is called (as it succeeds, without the token, on an id that is not
there, with a bad value) against a running gateway, and each answer's status and body must be what the document
served at /schema/openapi.json says."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema  # type: ignore[import-untyped]
import pytest

from services.client import SyncClient
from services.local.mesh import Mesh
from tests.integration.gateway import AUTH, gateway_mesh, http_base
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.integration]

IDS = {"node_id": "r1", "address": "10.9.9.9", "actor_id": "r-a", "pg_id": "r-pg", "vc_id": "r-vc"}
"""The ids a successful call names (made before the calls)."""
BODIES: dict[tuple[str, str], Any] = {
    ("put", "/api/v1/nodes/{node_id}/labels"): {"tier": "web"},
    ("post", "/api/v1/actors"): {"actor_id": "r-new", "resources": {"CPU": 1}},
    ("post", "/api/v1/placement-groups"): {"pg_id": "r-new-pg", "bundles": [{"CPU": 1}]},
    ("post", "/api/v1/vclusters"): {"vc_id": "r-new-vc", "spec": {"flexible_resource_min": {"CPU": 1}}},
}
"""A valid body per route that takes one (taint routes take `{"key": "value"}`)."""
BAD_QUERIES = {"/api/v1/nodes": {"selector": "zone=in("}, "/api/v1/events": {"since": "yesterday-ish"}}


def checked(document: dict[str, Any], method: str, path: str, answer: httpx.Response) -> int:
    """Assert the document lists the answer's status for the route and its body validates; return the status."""
    responses = document["paths"][path][method]["responses"]
    status = str(answer.status_code)
    assert status in responses, f"{method.upper()} {path} answered {status} ({answer.text}); documented: {responses}"
    content = responses[status].get("content") or {}
    schema = content.get("application/json", {}).get("schema")
    if schema is not None:
        jsonschema.validate(answer.json(), {**schema, "components": document["components"]})
    return answer.status_code


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory, server_path: ServerPath) -> Iterator[Mesh]:
    with gateway_mesh(tmp_path_factory.mktemp("reference") / "mesh", server_path) as running:
        yield running


def test_every_route_answers_as_the_openapi_document_says(mesh: Mesh) -> None:
    with (
        SyncClient(mesh.nats_url, timeout=10.0) as corral,
        httpx.Client(base_url=http_base(mesh), timeout=15.0) as http,
    ):
        corral.register_node("r1", {"CPU": 8}, {"tier": "db"}, address="10.9.9.9", heartbeat=False)
        http.post("/api/v1/actors", json={"actor_id": "r-a", "resources": {"CPU": 1}}, headers=AUTH)
        http.post("/api/v1/placement-groups", json={"pg_id": "r-pg", "bundles": [{"CPU": 1}]}, headers=AUTH)
        spec = {"vc_id": "r-vc", "spec": {"flexible_resource_min": {"CPU": 1}}}
        assert http.post("/api/v1/vclusters", json=spec, headers=AUTH).status_code == 200
        http.post("/api/v1/taints/r1", json={"gone": "soon"}, headers=AUTH)
        http.post("/nodes/taints/r1", json={"old": "x"}, headers=AUTH)

        document = http.get("/schema/openapi.json").json()
        assert document["components"]["securitySchemes"]["bearer"] == {
            "type": "http",
            "scheme": "bearer",
            "description": "CORRAL_HTTP_TOKEN, when the gateway has one",
        }
        seen: dict[str, set[int]] = {}
        for path, item in document["paths"].items():
            for method, operation in item.items():
                if method not in ("get", "post", "put", "delete"):
                    continue
                route = f"{method.upper()} {path}"
                body = BODIES.get((method, path), {"gone": ""} if "taints" in path else None)
                if "taints" in path and method == "delete" and path.startswith("/nodes"):
                    body = {"old": ""}
                url = path.format(**IDS)
                statuses = seen.setdefault(route, set())
                if path != "/api/v1/events":  # an event stream: only its refusal is a JSON answer
                    statuses.add(checked(document, method, path, http.request(method, url, json=body, headers=AUTH)))
                if "security" in operation:
                    assert operation["security"] == [{"bearer": []}], route
                    refused = http.request(method, url, json=body)
                    assert checked(document, method, path, refused) == 401, route
                if ("{" in path and method != "post") or "/taints/" in path:
                    missing = path.replace("{", "x{").format(**dict.fromkeys(IDS, "-gone"))
                    statuses.add(
                        checked(document, method, path, http.request(method, missing, json=body, headers=AUTH))
                    )
                if path in BAD_QUERIES:
                    statuses.add(checked(document, method, path, http.get(path, params=BAD_QUERIES[path])))
        assert {route for route, statuses in seen.items() if 200 in statuses} >= {
            "GET /api/v1/nodes",
            "POST /api/v1/actors",
            "DELETE /api/v1/actors/{actor_id}",
            "DELETE /api/v1/vclusters/{vc_id}",
            "DELETE /api/v1/taints/{node_id}",
        }
        assert 404 in seen["DELETE /api/v1/taints/{node_id}"] and 400 in seen["GET /api/v1/nodes"]
