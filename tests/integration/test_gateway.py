"""The HTTP API against a running mesh: proposal 002's taint calls byte for byte, every endpoint, the event stream
resumed with Last-Event-ID, and every error a user can provoke (4xx naming the problem, 503 naming the service)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from schemas import Taint
from services.client import SyncClient
from services.local.mesh import Mesh
from tests.integration.gateway import AUTH, JSON, cluster_state, gateway_mesh, http_base
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.integration]

PROPOSAL_BODY = b'{\n  "gpu_node":"true"\n}'
"""Proposal 002's body, as it is written there."""


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory, server_path: ServerPath) -> Iterator[Mesh]:
    """One mesh with the gateway for this module's tests (each uses its own ids)."""
    with gateway_mesh(tmp_path_factory.mktemp("gateway") / "mesh", server_path) as running:
        yield running


@pytest.fixture(scope="module")
def corral(mesh: Mesh) -> Iterator[SyncClient]:
    """A Python client of the same mesh, to register nodes and to check what the HTTP calls did."""
    with SyncClient(mesh.nats_url, timeout=10.0) as client:
        yield client


@pytest.fixture
def http(mesh: Mesh) -> Iterator[httpx.Client]:
    """An HTTP client of the gateway."""
    with httpx.Client(base_url=http_base(mesh), timeout=15.0) as client:
        yield client


def test_proposal_002_taint_calls_append_and_delete_byte_for_byte(http: httpx.Client, corral: SyncClient) -> None:
    corral.register_node("p1", {"CPU": 4}, heartbeat=False)

    added = http.post("/nodes/taints/p1", content=PROPOSAL_BODY, headers=JSON)
    assert added.status_code == 200, added.text
    assert http.get("/api/v1/taints", params={"node_id": "p1"}).json() == {
        "p1": [{"key": "gpu_node", "value": "true", "effect": "NoSchedule"}]
    }
    waiting = http.post("/api/v1/actors", json={"actor_id": "p-cpu", "resources": {"CPU": 1}}, headers=AUTH).json()
    assert waiting["type"] == "pending" and "untolerated taint {gpu_node: true}" in waiting["message"]

    removed = http.request("DELETE", "/nodes/taints/p1", content=PROPOSAL_BODY, headers=JSON)
    assert removed.status_code == 200, removed.text
    assert http.get("/api/v1/taints", params={"node_id": "p1"}).json() in ({}, {"p1": []})
    assert corral.wait_placed("p-cpu").node_id == "p1"


def test_a_taint_value_picks_its_effect_and_taints_go_by_node_address(http: httpx.Client, corral: SyncClient) -> None:
    corral.register_node("p2", {"CPU": 1}, address="10.0.0.2:7000", heartbeat=False)

    added = http.post("/api/v1/taints/by-address/10.0.0.2:7000", json={"drain": "soon:NoExecute"}, headers=AUTH)
    assert added.status_code == 200, added.text
    assert corral.taints("p2") == {"p2": [Taint("drain", "soon", "NoExecute")]}
    removed = http.request("DELETE", "/api/v1/taints/by-address/10.0.0.2:7000", json={"drain": "soon"}, headers=AUTH)
    assert removed.status_code == 200, removed.text
    assert corral.taints("p2") in ({}, {"p2": []})


def test_a_delete_naming_an_effect_deletes_only_the_taint_with_that_effect(
    http: httpx.Client, corral: SyncClient
) -> None:
    corral.register_node("k1", {"CPU": 1}, address="10.0.0.11:7000", heartbeat=False)
    for effect in ("NoSchedule", "NoExecute", "PreferNoSchedule"):
        assert http.post("/nodes/taints/k1", json={"maint": f"now:{effect}"}, headers=AUTH).status_code == 200
    http.post("/nodes/taints/k1", json={"gpu": "true"}, headers=AUTH)

    removed = http.request("DELETE", "/nodes/taints/k1", json={"maint": ":NoExecute"}, headers=AUTH)
    assert removed.status_code == 200, removed.text
    assert {(taint.key, taint.effect) for taint in corral.taints("k1")["k1"]} == {
        ("maint", "NoSchedule"),
        ("maint", "PreferNoSchedule"),
        ("gpu", "NoSchedule"),
    }
    by_address = {"maint": "now:PreferNoSchedule"}
    assert http.request("DELETE", "/api/v1/taints/by-address/10.0.0.11:7000", json=by_address, headers=AUTH).is_success
    assert {(taint.key, taint.effect) for taint in corral.taints("k1")["k1"]} == {
        ("maint", "NoSchedule"),
        ("gpu", "NoSchedule"),
    }
    assert http.request("DELETE", "/nodes/taints/k1", json={"maint": "now", "gpu": "x"}, headers=AUTH).is_success
    assert corral.taints("k1") in ({}, {"k1": []})


def test_a_node_is_alive_tainted_cordoned_or_draining_by_its_taints(http: httpx.Client, corral: SyncClient) -> None:
    corral.register_node("s1", {"CPU": 1}, heartbeat=False)
    corral.register_node("s2", {"CPU": 1}, taints={"maint": "now"}, heartbeat=False)
    corral.register_node("s3", {"CPU": 1}, taints=[Taint("slow", "yes", "PreferNoSchedule")], heartbeat=False)
    corral.register_node("s4", {"CPU": 1}, taints={"corral.io/scale-down": "true"}, heartbeat=False)
    corral.register_node("s5", {"CPU": 1}, taints={"corral.io/unschedulable": ""}, heartbeat=False)
    corral.register_node("s6", {"CPU": 1}, taints=[Taint("corral.io/drain", "", "NoExecute")], heartbeat=False)

    states = {node["node_id"]: node["state"] for node in http.get("/api/v1/nodes").json()}
    assert [states[f"s{number}"] for number in range(1, 7)] == [
        "alive",
        "tainted",
        "alive",
        "draining",
        "cordoned",
        "draining",
    ]


def test_a_batch_of_actors_is_answered_in_order_and_a_bad_batch_is_400_naming_the_rule(
    http: httpx.Client, corral: SyncClient
) -> None:
    """`POST /api/v1/actors/batch`: one answer per request in order (a refused one in its place); an empty or an
    over-long array is 400 naming the field and the rule, and places nothing."""
    corral.register_node("b1", {"CPU": 2}, labels={"pool": "batch"}, taints={"pool": "batch"}, heartbeat=False)
    ours = {"resources": {"CPU": 1}, "label_selector": {"pool": "batch"}, "tolerations": {"pool": "batch"}}
    body = [{"actor_id": f"hb-{index}", **ours} for index in range(3)]
    body.insert(1, {"actor_id": "hb-bad", "label_selector": {"zone": "in()"}})
    answers = http.post("/api/v1/actors/batch", json=body, headers=AUTH)
    assert answers.status_code == 200, answers.text
    assert [(answer["type"], answer.get("id")) for answer in answers.json()] == [
        ("placed", "hb-0"),
        ("rejected", None),
        ("placed", "hb-1"),
        ("pending", "hb-2"),
    ]
    assert "zone" in answers.json()[1]["error"]
    for refused, words in (([], "an array of 0 requests"), ([body[0]] * 1_001, "an array of 1001 requests")):
        answer = http.post("/api/v1/actors/batch", json=refused, headers=AUTH)
        assert answer.status_code == 400 and words in answer.text, (answer.status_code, answer.text[:300])
        assert "must hold at least 1 and at most 1000" in answer.text
    assert corral.placements().keys() & {f"hb-{index}" for index in range(3)} == {"hb-0", "hb-1"}


def test_nodes_labels_actors_groups_pending_and_why(http: httpx.Client, corral: SyncClient) -> None:
    corral.register_node("l1", {"CPU": 2}, labels={"disk": "ssd"}, heartbeat=False)
    corral.register_node("l2", {"CPU": 2}, labels={"disk": "hdd"}, heartbeat=False)

    relabelled = http.put("/api/v1/nodes/l2/labels", json={"disk": "nvme", "rack": "r2"}, headers=AUTH)
    assert relabelled.status_code == 200, relabelled.text
    nodes = http.get("/api/v1/nodes", params={"selector": "disk=in(ssd,nvme),rack=exists()"}).json()
    assert [(node["node_id"], node["labels"]["disk"], node["resources"]) for node in nodes] == [
        ("l2", "nvme", {"CPU": 2.0})
    ]
    layers = nodes[0]["layers"]  # a replacement names every user label: the agent's disk=hdd is overridden
    assert layers["agent_labels"]["disk"] == "hdd"
    assert layers["operator_labels"] == {"labels": {"disk": "nvme", "rack": "r2"}, "removed": []}

    request = {"actor_id": "l-a", "resources": {"CPU": 2}, "labels": {"app": "web"}, "label_selector": {"disk": "ssd"}}
    placed = http.post("/api/v1/actors", json=request, headers=AUTH)
    assert (placed.status_code, placed.json()) == (
        200,
        {"type": "placed", "id": "l-a", "node_id": "l1", "bundle_nodes": [], "bundle_index": -1},
    )
    assert [node["available"] for node in http.get("/api/v1/nodes", params={"selector": "disk=ssd"}).json()] == [
        {"CPU": 0.0}
    ]
    assert [actor["actor_id"] for actor in http.get("/api/v1/actors", params={"labels": "app=web"}).json()] == ["l-a"]
    assert http.get("/api/v1/actors", params={"labels": "app=db"}).json() == []

    big = http.post("/api/v1/actors", json={"actor_id": "l-big", "resources": {"CPU": 64}}, headers=AUTH).json()
    assert big["type"] == "pending"
    why = http.get("/api/v1/actors/l-big/why").json()
    assert why["type"] == "pending" and why["message"] == big["message"]
    assert set(why["nodes_by_reason"]["Insufficient CPU"]) >= {"l1", "l2"}
    pending = {item["id"]: item for item in http.get("/api/v1/pending").json()}
    assert (
        pending["l-big"]["reasons"] == why["reasons"] and pending["l-big"]["nodes_by_reason"] == why["nodes_by_reason"]
    )

    group = {"pg_id": "l-g", "bundles": [{"CPU": 1}, {"CPU": 1}], "strategy": "PACK"}
    made = http.post("/api/v1/placement-groups", json=group, headers=AUTH).json()
    assert made["type"] == "placed" and len(made["bundle_nodes"]) == 2
    assert http.get("/api/v1/placement-groups").json()["l-g"] == made["bundle_nodes"]
    assert http.delete("/api/v1/placement-groups/l-g", headers=AUTH).status_code == 200
    assert "l-g" not in http.get("/api/v1/placement-groups").json()

    assert http.delete("/api/v1/actors/l-a", headers=AUTH).status_code == 200
    assert http.delete("/api/v1/actors/l-big", headers=AUTH).status_code == 200
    assert http.get("/api/v1/actors", params={"labels": "app=web"}).json() == []


def test_virtual_clusters_create_list_as_a_tree_show_and_destroy(http: httpx.Client, corral: SyncClient) -> None:
    corral.register_node("v1", {"CPU": 8}, heartbeat=False)
    parent = {"vc_id": "team", "spec": {"flexible_resource_min": {"CPU": 2}, "flexible_resource_max": {"CPU": 4}}}
    assert http.post("/api/v1/vclusters", json=parent, headers=AUTH).json()["type"] == "admitted"
    child = {"vc_id": "team-job", "parent": "team", "spec": {"flexible_resource_min": {"CPU": 1}}}
    assert http.post("/api/v1/vclusters", json=child, headers=AUTH).json()["type"] == "admitted"

    tree = [(entry["depth"], entry["cluster"]["cluster_id"]) for entry in http.get("/api/v1/vclusters").json()]
    ids = [cluster_id for _, cluster_id in tree]
    depth = {cluster_id: level for level, cluster_id in tree}
    assert ids.index("team-job") == ids.index("team") + 1 and depth["team-job"] == depth["team"] + 1
    shown = http.get("/api/v1/vclusters/team").json()
    assert (
        shown["cluster_id"] == "team" and shown["children"] == ["team-job"] and shown["max_resources"] == {"CPU": 4.0}
    )

    destroyed = http.delete("/api/v1/vclusters/team", headers=AUTH)
    assert destroyed.status_code == 200, destroyed.text
    assert set(destroyed.json()["destroyed"]) == {"team", "team-job"}
    assert http.get("/api/v1/vclusters/team").status_code == 404


def read_events(http: httpx.Client, count: int, **headers: str) -> list[tuple[str, str, str]]:
    """The first `count` events of the stream as (id, event, data)."""
    found: list[tuple[str, str, str]] = []
    fields: dict[str, str] = {}
    with http.stream("GET", "/api/v1/events", headers=headers) as stream:
        assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
        for line in stream.iter_lines():
            if line:
                name, _, value = line.partition(": ")
                fields[name] = value
                continue
            if "id" in fields:
                found.append((fields["id"], fields["event"], fields["data"]))
                if len(found) == count:
                    return found
            fields = {}
    return found


def test_the_event_log_as_server_sent_events_resumes_after_last_event_id(
    http: httpx.Client, corral: SyncClient
) -> None:
    corral.register_node("e1", {"CPU": 1}, heartbeat=False)
    first = read_events(http, 4)
    assert [int(event_id) for event_id, _, _ in first] == sorted(int(event_id) for event_id, _, _ in first)
    assert all(data.startswith("{") for _, _, data in first)

    resumed = read_events(http, 2, **{"Last-Event-ID": first[1][0]})
    assert resumed == first[2:4]
    since = http.get("/api/v1/events", params={"since": "0"})
    assert since.status_code == 400


def test_health_readiness_index_and_openapi(http: httpx.Client) -> None:
    assert http.get("/healthz").json() == {"status": "ok"}
    ready = http.get("/readyz").json()
    assert ready["ready"] is True and set(ready["services"]) == {"scheduler", "labels", "taints", "vclusters"}
    assert ready["snapshots"] == dict.fromkeys(ready["services"], "ok") and ready["warning"] == ""
    assert "POST /nodes/taints/{node_id:str}" in http.get("/api/v1").json()["routes"]
    assert http.get("/", headers={"Accept": "application/json"}).json()["page"] == "/"
    paths = http.get("/openapi.json").json()["paths"]
    assert {"/nodes/taints/{node_id}", "/api/v1/nodes", "/api/v1/events", "/api/v1/vclusters"} <= set(paths)
    docs = http.get("/docs", follow_redirects=True)
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


def gateway_requests(mesh: Mesh) -> dict[tuple[str, str, str], float]:
    """corral_gateway_requests_total by (route, method, status), scraped from the gateway's /metrics."""
    text = httpx.get(f"http://127.0.0.1:{mesh.metrics_ports['gateway']}/metrics", timeout=5.0).text
    return {
        (sample.labels["route"], sample.labels["method"], sample.labels["status"]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "corral_gateway_requests_total"
    }


def test_the_gateway_counts_its_requests_by_route_template_method_and_status(http: httpx.Client, mesh: Mesh) -> None:
    before = gateway_requests(mesh)
    http.get("/api/v1/actors/someone/why")
    http.post("/nodes/taints/n9", content=PROPOSAL_BODY, headers={"Content-Type": "application/json"})
    http.get("/no/such/page")

    counted = gateway_requests(mesh)
    for key in [
        ("/api/v1/actors/{actor_id}/why", "GET", "404"),
        ("/nodes/taints/{node_id}", "POST", "401"),
        ("(unmatched)", "GET", "404"),
    ]:
        assert counted.get(key, 0) == before.get(key, 0) + 1, key


def test_errors_are_4xx_with_the_services_message_and_change_nothing(http: httpx.Client, corral: SyncClient) -> None:
    corral.register_node("x1", {"CPU": 1}, heartbeat=False)
    before = cluster_state(http)

    bad_label = http.put("/api/v1/nodes/x1/labels", json={"disk": "not valid!"}, headers=AUTH)
    assert bad_label.status_code == 400 and bad_label.json()["kind"] == "invalid"
    assert "disk" in bad_label.json()["error"] and "not valid!" in bad_label.json()["error"]
    bad_effect = http.post("/nodes/taints/x1", json={"gpu": "true:Sometimes"}, headers=AUTH).json()
    assert (
        bad_effect["status"] == 400
        and "'true:Sometimes'" in bad_effect["error"]
        and "NoSchedule" in bad_effect["error"]
    )
    assert http.post("/nodes/taints/x1", json={}, headers=AUTH).status_code == 400
    assert http.get("/api/v1/nodes", params={"selector": "zone=in("}).status_code == 400

    unknown = http.get("/api/v1/actors/nobody/why")
    assert unknown.status_code == 404 and "nobody" in unknown.json()["error"]
    assert http.post("/nodes/taints/ghost", json={"gpu": "true"}, headers=AUTH).status_code == 404
    assert http.get("/api/v1/no-such-route").status_code == 404

    malformed = http.post("/nodes/taints/x1", content=b'{"gpu": ', headers=JSON)
    wrong_type = http.post("/nodes/taints/x1", json={"gpu": 1}, headers=AUTH)
    not_object = http.post("/api/v1/actors", json=["x"], headers=AUTH)
    unknown_field = http.post("/api/v1/actors", json={"actor_id": "x-a", "colour": "red"}, headers=AUTH)
    assert [answer.status_code for answer in (malformed, wrong_type, not_object, unknown_field)] == [400, 422, 422, 422]
    assert "colour" in unknown_field.json()["error"] and "not valid JSON" in malformed.json()["error"]
    assert wrong_type.json()["kind"] == "invalid" and "Expected `str`, got `int`" in wrong_type.json()["error"]

    too_big = http.post("/nodes/taints/x1", content=b"{" + b" " * (2 * 1024 * 1024) + b"}", headers=JSON)
    assert too_big.status_code == 413
    as_text = http.post("/nodes/taints/x1", content=PROPOSAL_BODY, headers={**AUTH, "Content-Type": "text/plain"})
    assert as_text.status_code == 415 and "text/plain" in as_text.json()["error"]

    no_token = http.post("/nodes/taints/x1", content=PROPOSAL_BODY, headers={"Content-Type": "application/json"})
    wrong_token = http.delete("/api/v1/actors/x-a", headers={"Authorization": "Bearer nope"})
    assert [no_token.status_code, wrong_token.status_code] == [401, 401]
    assert no_token.headers["www-authenticate"] == "Bearer"
    assert http.get("/api/v1/nodes").status_code == 200  # reading needs no token

    assert cluster_state(http) == before

    first = http.post("/api/v1/actors", json={"actor_id": "x-c", "resources": {"CPU": 1}}, headers=AUTH)
    assert first.status_code == 200
    again = http.post("/api/v1/actors", json={"actor_id": "x-c", "resources": {"CPU": 0.5}}, headers=AUTH)
    assert again.status_code == 409 and "x-c" in again.json()["error"]
    assert http.delete("/api/v1/actors/x-c", headers=AUTH).status_code == 200


def test_removing_what_is_not_there_is_404_naming_it(http: httpx.Client, corral: SyncClient) -> None:
    corral.register_node("nf1", {"CPU": 1}, heartbeat=False)
    for path in ("/nodes/taints/nf1", "/api/v1/taints/nf1"):
        gone = http.request("DELETE", path, json={"nosuch": ""}, headers=AUTH)
        said = {"error": "taint 'nosuch' not found on node nf1", "kind": "not_found", "status": 404}
        assert (gone.status_code, gone.json()) == (404, said)
    for path in ("/api/v1/actors/ghost", "/api/v1/placement-groups/ghost", "/api/v1/vclusters/ghost"):
        assert http.delete(path, headers=AUTH).status_code == 404, path


def test_an_idempotency_key_reused_for_another_request_is_409_naming_the_key(
    http: httpx.Client, corral: SyncClient
) -> None:
    """The same `Idempotency-Key` with CPU 1 then CPU 3: the first's decision again for the same body, 409 naming
    the key and the field for the other (before: 200 with the first's placement, for a request never stored)."""
    corral.register_node("i1", {"CPU": 4}, heartbeat=False)
    keyed = {**AUTH, "Idempotency-Key": "idem-k1"}
    body = {"actor_id": "i-a", "resources": {"CPU": 1}}
    first = http.post("/api/v1/actors", json=body, headers=keyed)
    assert first.status_code == 200 and first.json()["type"] == "placed", first.text
    assert http.post("/api/v1/actors", json=body, headers=keyed).json() == first.json()
    other = http.post("/api/v1/actors", json={**body, "resources": {"CPU": 3}}, headers=keyed)
    assert other.status_code == 409 and other.json()["kind"] == "conflict", other.text
    assert "command_id 'idem-k1'" in other.json()["error"]
    assert "resources: {'CPU': 1.0} then {'CPU': 3.0}" in other.json()["error"]
    assert corral.placements()["i-a"] == "i1"
    assert http.delete("/api/v1/actors/i-a", headers=AUTH).status_code == 200


def test_a_service_that_does_not_answer_is_503_naming_it(tmp_path: Path, server_path: ServerPath) -> None:
    with (
        gateway_mesh(tmp_path / "mesh", server_path) as running,
        httpx.Client(base_url=http_base(running), timeout=30.0) as http,
    ):
        running.stop_service("taints")
        ready = http.get("/readyz")
        assert ready.status_code == 503 and ready.json()["services"]["taints"] != "ok"
        assert ready.json()["error"] == "not answering: taints"
        taints = http.get("/api/v1/taints")
        assert (taints.status_code, taints.json()["service"]) == (503, "taints")
        running.stop_service("scheduler")
        submitted = http.post("/api/v1/actors", json={"actor_id": "late", "resources": {"CPU": 1}}, headers=AUTH)
        assert (submitted.status_code, submitted.json()["service"]) == (503, "scheduler")
        page = http.get("/", headers={"Accept": "text/html"})
        assert page.status_code == 200 and 'id="nodes"' in page.text
        assert page.text.count("Not available now:") == 3  # pending work, actors and placement groups ask the scheduler
