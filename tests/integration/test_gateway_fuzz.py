"""Fuzz pass of the HTTP API: malformed bodies on every mutating route get a 4xx, never a 500, and change nothing;
the event stream's `since` and `Last-Event-ID` of any shape get a 4xx or the stream from the place asked for.

Each example is one request that must be refused: bytes that are not a JSON object, JSON of the wrong type, an
object with a field no route takes (a number where taints and labels want strings, an unknown field for the
structs), or a good body without the token or with another content type. CORRAL_FUZZ_EXAMPLES (25 in `make test`,
200 when unset) sets how many; the nodes, taints, labels, actors, groups and clusters are the same after as before.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from services.client import SyncClient
from services.local.mesh import Mesh
from tests.integration.gateway import AUTH, JSON, TOKEN, cluster_state, gateway_mesh, http_base
from tests.integration.watchers import last_sequence
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.integration, pytest.mark.fuzz]

EXAMPLES = int(os.environ.get("CORRAL_FUZZ_EXAMPLES", "200"))

ROUTES = [
    ("POST", "/nodes/taints/f1"),
    ("DELETE", "/nodes/taints/f1"),
    ("POST", "/api/v1/taints/f1"),
    ("DELETE", "/api/v1/taints/f1"),
    ("POST", "/api/v1/taints/by-address/10.9.9.9:1"),
    ("DELETE", "/api/v1/taints/by-address/10.9.9.9:1"),
    ("PUT", "/api/v1/nodes/f1/labels"),
    ("POST", "/api/v1/actors"),
    ("POST", "/api/v1/actors/batch"),
    ("POST", "/api/v1/placement-groups"),
    ("POST", "/api/v1/vclusters"),
]
"""Every route that takes a body."""

POISON = {"zz_poison": 1}
"""Refused by every route: not a string (taints, labels), and a field no request struct has."""

GOOD = b'{"gpu_node": "true"}'
"""A body the taint routes would apply (sent without the token or as another content type)."""

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=6)


def not_an_object(data: bytes) -> bool:
    """Whether `data` is anything but a JSON object (an object might be a good body)."""
    try:
        return not isinstance(json.loads(data), dict)
    except ValueError:
        return True


refused_bodies = st.one_of(
    st.binary(max_size=120).filter(not_an_object),
    json_values.map(lambda value: json.dumps(value).encode()),
    st.dictionaries(st.text(max_size=8), json_values, max_size=3).map(
        lambda value: json.dumps({**value, **POISON}).encode()
    ),
).map(lambda body: (body, JSON))
refused_callers = st.one_of(
    st.just((GOOD, {"Content-Type": "application/json"})),
    st.just((GOOD, {"Content-Type": "application/json", "Authorization": "Bearer wrong"})),
    st.sampled_from(["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]).map(
        lambda media: (GOOD, {**AUTH, "Content-Type": media})
    ),
)


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory, server_path: ServerPath) -> Iterator[Mesh]:
    """A mesh with the gateway and one node (labels and a taint) whose every field a request could change."""
    with (
        gateway_mesh(tmp_path_factory.mktemp("gateway-fuzz") / "mesh", server_path) as running,
        SyncClient(running.nats_url, timeout=10.0) as client,
    ):
        client.register_node(
            "f1", {"CPU": 2}, labels={"disk": "ssd"}, taints={"old": "x"}, address="10.9.9.9:1", heartbeat=False
        )
        yield running


def test_malformed_bodies_on_every_mutating_route_are_4xx_and_change_nothing(mesh: Mesh) -> None:
    with httpx.Client(base_url=http_base(mesh), timeout=15.0) as http:
        before = cluster_state(http)
        deep = b"[" * 100_000 + b"]" * 100_000
        for method, path in ROUTES:
            answer = http.request(method, path, content=deep, headers=JSON)
            assert 400 <= answer.status_code < 500, (method, path, answer.status_code, answer.text[:300])

        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
        @given(route=st.sampled_from(ROUTES), sent=refused_bodies | refused_callers)
        def refused(route: tuple[str, str], sent: tuple[bytes, dict[str, str]]) -> None:
            body, headers = sent
            answer = http.request(route[0], route[1], content=body, headers=headers)
            assert 400 <= answer.status_code < 500, (route, body[:200], answer.status_code, answer.text[:300])
            assert answer.json()["status"] == answer.status_code

        refused()
        assert cluster_state(http) == before


form_fields = st.fixed_dictionaries(
    {
        "node_id": st.sampled_from(["f1", "ghost", ""]) | st.text(max_size=20),
        "key": st.sampled_from(["old", "gpu"]) | st.text(max_size=30),
        "value": st.text(max_size=30),
        "effect": st.sampled_from(["NoSchedule", "Sometimes", ""]) | st.text(max_size=20),
        "token": st.sampled_from(["", "wrong"]) | st.text(max_size=20).filter(lambda token: token != TOKEN),
    }
)


def test_hostile_forms_of_the_page_without_the_token_are_refused_and_change_nothing(mesh: Mesh) -> None:
    """The page's form posts (a browser without the script): any fields, without the token, are answered with the
    page and the refusal (a redirect) or a 4xx, never a 500, and change nothing."""
    with httpx.Client(base_url=http_base(mesh), timeout=15.0) as http:
        before = cluster_state(http)

        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
        @given(path=st.sampled_from(["/ui/taints/add", "/ui/taints/remove"]), form=form_fields)
        def refused(path: str, form: dict[str, str]) -> None:
            answer = http.post(path, data=form, follow_redirects=False)
            assert answer.status_code == 303 or 400 <= answer.status_code < 500, (path, form, answer.status_code)

        refused()
        assert cluster_state(http) == before


since_values = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["", "1.5", "1e3", "0x10", " 1", "1 ", "²", "١٢", "NaN", "-0", "+3"]),
    st.text(max_size=12),
)
last_event_ids = st.one_of(
    st.none(),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["", " ", "²", "١٢", "1.0", "0x1", "-1", " 7 "]),
    st.text(alphabet=st.sampled_from([chr(c) for c in (*range(32, 127), *range(160, 256))]), max_size=16),
)
"""Header values as HTTP carries them (visible ASCII, spaces, Latin-1)."""


def whole(text: str) -> int | None:
    """The whole number a lenient parser reads in `text` (`1e3` is 1000), or None."""
    try:
        number = float(text)
    except ValueError:
        return None
    return int(number) if number.is_integer() else None


def first_id(answer: httpx.Response) -> int:
    """The `id` of a stream's first event."""
    for line in answer.iter_lines():
        if line.startswith("id: "):
            return int(line[4:])
    raise AssertionError("the stream ended before its first event")


def test_hostile_event_stream_parameters_are_a_stream_from_the_right_place_or_a_4xx(mesh: Mesh) -> None:
    """`since` and `Last-Event-ID` of any shape (and unknown parameters): a 4xx naming the problem, or a stream
    whose first event is the one asked for (after `Last-Event-ID` when it is given, else `since`); never a 500."""
    with httpx.Client(base_url=http_base(mesh), timeout=15.0) as http:
        last = asyncio.run(last_sequence(mesh.nats_url))

        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
        @given(since=st.none() | since_values, last_event_id=last_event_ids, extra=st.text(max_size=8))
        def streamed(since: str | None, last_event_id: str | None, extra: str) -> None:
            params = {} if since is None else {"since": since}
            params[f"x{extra}"] = extra
            if last_event_id is not None:  # as the gateway reads it: UTF-8 as Latin-1, the spaces around dropped
                last_event_id = last_event_id.encode().decode("latin-1").strip(" ")
            headers = {} if last_event_id is None else {b"Last-Event-ID": last_event_id.encode("latin-1")}
            with http.stream("GET", "/api/v1/events", params=params, headers=headers) as answer:
                if answer.status_code != 200:
                    assert 400 <= answer.status_code < 500, (since, last_event_id, answer.status_code)
                    answer.read()
                    assert answer.json()["status"] == answer.status_code
                    return
                assert answer.headers["content-type"].startswith("text/event-stream")
                given = (last_event_id or "").strip()
                start = int(given) + 1 if given else whole(since or "1")
                if start is not None and start <= last:
                    assert first_id(answer) == start, (since, last_event_id)

        streamed()


page_values = st.one_of(
    st.text(max_size=16),
    st.sampled_from(["f1", "<script>x</script>", "f1&node=f1", "../f1", "%00", "f1#x"]),
)


def test_hostile_queries_of_the_page_are_answered_escaped_and_the_nodes_asked_for_are_the_live_ones(mesh: Mesh) -> None:
    """The page's read routes (`/?node=`, `/ui/detail?node=`, `/ui/<section>`, `/ui/data/nodes?id=`) with any
    values: 200 or a 4xx, never a 500; no value comes back as markup (one the page holds anyway, as "<" alone, says
    nothing); the nodes asked for by id are exactly the live ones among them; and nothing changes."""
    with httpx.Client(base_url=http_base(mesh), timeout=15.0, headers={"Accept": "text/html"}) as http:
        before = cluster_state(http)
        pages: dict[str, str] = {}

        def page_without(route: str) -> str:
            """The route's page asked about no node (what its markup holds whatever is asked)."""
            if route not in pages:
                pages[route] = http.get(route).text
            return pages[route]

        @settings(max_examples=EXAMPLES // 4, deadline=None, suppress_health_check=list(HealthCheck))
        @given(
            route=st.sampled_from(["/", "/ui/detail", "/ui/summary", "/ui/pending", "/ui/nodes", "/ui/data/nodes"]),
            value=page_values,
            ids=st.lists(page_values, max_size=3),
        )
        @example(route="/", value="<", ids=[])  # the page's own markup: once taken for the value echoed
        @example(route="/ui/detail", value="<script>x</script>", ids=[])
        def answered(route: str, value: str, ids: list[str]) -> None:
            params = {"id": [*ids, value]} if route == "/ui/data/nodes" else {"node": [value]}
            answer = http.get(route, params=params)
            assert answer.status_code == 200 or 400 <= answer.status_code < 500, (route, value, answer.status_code)
            if route == "/ui/data/nodes":
                assert [node["node_id"] for node in answer.json()] == (["f1"] if "f1" in [*ids, value] else [])
            elif answer.status_code == 200 and "<" in value and value not in page_without(route):
                assert value not in answer.text, (route, value)  # ("<" or "<a" alone: the page's own markup)

        answered()
        assert cluster_state(http) == before
