"""Hypothesis strategies for the fuzz suite: every subject a service reads, and hostile payloads of every kind.

A target is a subject and how it is sent (appended to the log, a durable request, request/reply, a heartbeat).
A payload starts from a well-formed message of the target's own type (or of another type), then is left valid
(its ids drawn from a small pool that includes ids nothing registered: bad references), or broken: an unknown
field, a wrong type, an impossible amount (negative, NaN, 1e999), invalid UTF-8 inside a string, nesting
thousands of levels deep, more bytes than a service accepts; besides forged elections and random bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from hypothesis import strategies as st

from schemas import subjects as s

Via = Literal["log", "request", "ask", "heartbeat"]
"""How a target is sent: appended to the event log, a durable scheduler request, request/reply, a plain publish."""


@dataclass(frozen=True)
class Target:
    """A subject a service reads, how it is sent there, and the kind of message it expects."""

    subject: str
    via: Via
    kind: str


@dataclass(frozen=True)
class Payload:
    """The bytes sent, and what they are (for the report of a failing example)."""

    family: str
    """The kind of payload: well-formed, unknown field, wrong type, amount, UTF-8, nesting, oversized, ..."""
    how: str
    data: bytes

    def __repr__(self) -> str:
        shown = self.data[:160] + (b"..." if len(self.data) > 160 else b"")
        return f"Payload({self.family}: {self.how}, {len(self.data):,} bytes: {shown!r})"


NODES = ("n0", "n1", "ghost")
ACTORS = ("a0", "a1", "ghost-actor")
GROUPS = ("pg0", "ghost-pg")
CLUSTERS = ("vc0", "ghost-vc")
LAUNCHES = ("L1", "L2", "ghost-launch")
BAD_NUMBERS = ("-1", "NaN", "1e999", "-1e999", "1e308", "Infinity", "-0.0")
"""Amounts as JSON text: negative, not a number, infinite (1e999 overflows a float), huge."""
BAD_UTF8 = (b"\xed\xb3\xbf", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80", b"\xf8\x88\x80\x80\x80")
OVERSIZED_LIMIT = 900_000
"""The largest payload sent: above what a service accepts (256 KiB by default), under NATS's 1 MB limit."""

ids = st.sampled_from
resources = st.fixed_dictionaries({"CPU": st.sampled_from([0.5, 1.0, 4.0])})
epochs = st.sampled_from([0, 1, 2, 3, 999_999_999, 2**62])
taint = st.fixed_dictionaries(
    {"key": st.sampled_from(["gpu", "dedicated"]), "value": st.just("x"), "effect": st.sampled_from(["NoSchedule"])}
)
schedule_request = st.fixed_dictionaries(
    {"actor_id": ids(ACTORS), "resources": resources},
    optional={"label_selector": st.just({"tier": "web"}), "vcluster_id": ids(CLUSTERS)},
)
group_request = st.fixed_dictionaries({"pg_id": ids(GROUPS), "bundles": st.lists(resources, min_size=1, max_size=2)})
spec = st.fixed_dictionaries({"flexible_resource_max": resources})
grant = st.fixed_dictionaries({"vnode_id": st.just("vn0"), "parent_node": ids(NODES), "resources": resources})
size = st.fixed_dictionaries(
    {
        "vc_id": ids(CLUSTERS),
        "vnode_id": st.sampled_from(["vn0", "vc0-flex-n0", "ghost-vnode"]),
        "parent_node": ids(NODES),
        "resources": st.sampled_from([{}, {"CPU": 0.0}, {"CPU": 2.0}, {"CPU": 1.0, "GPU": 1.0}]),
    }
)
"""A virtual node's new size as an actor event carries it: grown, released (nothing left), or of a ghost."""


def event(tag: str, **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A well-formed event of type `tag` (its envelope's epoch drawn too)."""
    return st.fixed_dictionaries({"type": st.just(tag), "epoch": epochs, **fields})


def struct(tag_field: str = "", tag: str = "", **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A well-formed command, request or query (tagged when `tag` is given)."""
    tagged = {tag_field: st.just(tag)} if tag else {}
    return st.fixed_dictionaries({**tagged, **fields})


EVENTS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    s.NODE: st.one_of(
        event("NodeRegistered", node_id=ids(NODES), resources=resources, labels=st.just({"tier": "web"})),
        event("NodeDied", node_id=ids(NODES)),
        event("NodeLabelsChanged", node_id=ids(NODES), labels=st.just({"tier": "db"})),
        event("NodeUnreachable", node_id=ids(NODES), last_heard=st.floats(-1e12, 1e12, allow_nan=False)),
        event("NodeReachable", node_id=ids(NODES), unreachable_for=st.floats(-10, 1e10, allow_nan=False)),
        event(
            "NodeDeclaredDead",
            node_id=ids(NODES),
            unreachable_for=st.floats(-10, 1e10, allow_nan=False),
            dead_for=st.floats(-10, 1e10, allow_nan=False),
        ),
    ),
    s.TAINT: event("TaintsChanged", node_id=ids(NODES), taints=st.lists(taint, max_size=2)),
    s.ACTOR: st.one_of(
        event("ActorSubmitted", request=schedule_request),
        event("ActorPlaced", actor_id=ids(ACTORS), node_id=ids(NODES)),
        event("ActorPlaced", actor_id=ids(ACTORS), node_id=ids(NODES), request=schedule_request),
        event(
            "ActorPlaced", actor_id=ids(ACTORS), node_id=ids(NODES), prng=st.integers(-1, 2**64), folded=st.integers()
        ),
        event("ActorPending", actor_id=ids(ACTORS), explanation=st.just({"total": 0, "message": "waits"})),
        event("ActorFailed", actor_id=ids(ACTORS), node_id=ids(NODES), reason=st.just("x"), will_restart=st.booleans()),
        event("ActorRemoved", actor_id=ids(ACTORS)),
        event(
            "ActorPlaced",
            actor_id=ids(ACTORS),
            node_id=ids(NODES),
            request=schedule_request,
            resized=st.lists(size, max_size=3),
        ),
        event("ActorRemoved", actor_id=ids(ACTORS), resized=st.lists(size, max_size=3)),
    ),
    s.PLACEMENT_GROUP: st.one_of(
        event("PlacementGroupSubmitted", request=group_request),
        event("PlacementGroupPlaced", pg_id=ids(GROUPS), bundle_nodes=st.lists(ids(NODES), min_size=1, max_size=2)),
        event("PlacementGroupBundlesLost", pg_id=ids(GROUPS), bundle_indices=st.just([0]), reason=st.just("x")),
        event("PlacementGroupRemoved", pg_id=ids(GROUPS)),
    ),
    s.SCHEDULER: event("SchedulerElected", instance=st.sampled_from(["forger", "scheduler"])),
    s.VCLUSTER: st.one_of(
        event("VirtualClusterRequested", vc_id=ids(CLUSTERS), spec=spec),
        event("VirtualClusterDestroyRequested", vc_id=ids(CLUSTERS), force=st.booleans()),
    ),
    s.VNODE: st.one_of(
        event("VirtualClusterQueued", vc_id=ids(CLUSTERS), reason=st.just("x")),
        event("VirtualNodesReserved", vc_id=ids(CLUSTERS), vnodes=st.lists(grant, max_size=2)),
        event(
            "VirtualNodeResized",
            vc_id=ids(CLUSTERS),
            vnode_id=st.just("vn0"),
            parent_node=ids(NODES),
            resources=resources,
        ),
        event("VirtualClusterDestroyed", vc_id=ids(CLUSTERS)),
    ),
    s.AUTOSCALER: st.one_of(
        event(
            "AutoscalerElected",
            instance=st.sampled_from(["forger", "autoscaler"]),
            node_type_labels=st.dictionaries(  # what explanations suggest keys from: hostile text included
                st.sampled_from(["cpu-4", "gpu-a100", "ghost-type"]),
                st.dictionaries(st.text(max_size=40), st.text(max_size=40), max_size=4),
                max_size=3,
            ),
        ),
        event(
            "NodesLaunchRequested",
            node_type=st.sampled_from(["cpu-4", "ghost-type"]),
            launch_ids=st.lists(ids(LAUNCHES), max_size=2),
            reason=st.just("x"),
            work=st.lists(ids(ACTORS), max_size=2),
            requested_at=st.sampled_from([0.0, 1e9, 1e12]),
            nominated=st.dictionaries(ids(LAUNCHES), st.dictionaries(ids(ACTORS), resources), max_size=2),
        ),
        event(
            "LaunchesNominated",
            nominated=st.dictionaries(ids(LAUNCHES), st.dictionaries(ids(ACTORS), resources), max_size=2),
            existing=st.dictionaries(
                ids(LAUNCHES), st.dictionaries(ids(NODES), st.dictionaries(ids(GROUPS), resources)), max_size=2
            ),
        ),
        event("NodeLaunchFailed", launch_id=ids(LAUNCHES), reason=st.just("x")),
        event("NodeDrainStarted", node_id=ids(NODES), launch_id=ids(LAUNCHES), reason=st.just("x")),
        event("NodeDrainCancelled", node_id=ids(NODES), launch_id=ids(LAUNCHES), reason=st.just("x")),
        event("NodeTerminationRequested", node_id=ids(NODES), launch_id=ids(LAUNCHES), reason=st.just("x")),
    ),
}
"""Well-formed events per aggregate, about ids that may or may not exist."""

MESSAGES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    s.REGISTER_NODE: struct(node_id=ids(NODES), resources=resources, labels=st.just({"tier": "web"})),
    s.SET_LABELS: struct(
        node_id=ids(NODES),
        labels=st.just({"tier": "db"}),
        merge=st.booleans(),
        remove=st.just(["disk"]),
        overwrite=st.booleans(),
    ),
    s.REMOVE_NODE: struct(node_id=ids(NODES)),
    s.ADD_TAINTS: struct(node_id=ids(NODES), taints=st.lists(taint, max_size=2)),
    s.REMOVE_TAINTS: struct(node_id=ids(NODES), keys=st.just(["gpu"]), effects=st.just({"gpu": ["NoSchedule"]})),
    s.CREATE_VCLUSTER: struct(vc_id=ids(CLUSTERS), spec=spec),
    s.DESTROY_VCLUSTER: struct(vc_id=ids(CLUSTERS), force=st.booleans()),
    s.SCHEDULE: struct("kind", "schedule", request=schedule_request),
    s.CREATE_PLACEMENT_GROUP: struct("kind", "placement_group", request=group_request),
    s.REMOVE_ACTOR: struct("kind", "remove_actor", actor_id=ids(ACTORS)),
    s.REPORT_ACTOR_FAILED: struct("kind", "fail_actor", actor_id=ids(ACTORS)),
    s.REMOVE_PLACEMENT_GROUP: struct("kind", "remove_placement_group", pg_id=ids(GROUPS)),
    s.BATCH: struct(
        "kind",
        "batch",
        requests=st.lists(
            st.one_of(
                struct("kind", "schedule", request=schedule_request),
                struct("kind", "remove_actor", actor_id=ids(ACTORS)),
                struct("kind", "fail_actor", actor_id=ids(ACTORS)),
            ),
            min_size=1,
            max_size=4,
        ),
    ),
    s.NODES_QUERY: struct(selector=st.just({"tier": "web"})),
    s.ACTORS_QUERY: struct(labels=st.just({"k": "v"})),
    s.TAINTS_QUERY: struct(node_id=ids(NODES)),
    s.STATUS_QUERY: struct(),
    s.DECISION_QUERY: struct(id=ids(ACTORS)),
    s.VCLUSTER_QUERY: struct(vc_id=ids(CLUSTERS)),
    s.VCLUSTERS_QUERY: struct(),
    s.VCLUSTER_WORK_QUERY: struct(vc_id=ids(CLUSTERS)),
    s.VCLUSTER_NODES_QUERY: struct(vc_id=ids(CLUSTERS)),
    s.AUTOSCALER_STATUS_QUERY: struct(),
    s.AUTOSCALER_WHY_QUERY: struct(id=ids(ACTORS), kind=st.sampled_from(["actor", "placement_group"])),
}
"""A well-formed message per command, request and query subject."""

SERVICES = ("labels", "taints", "vclusters", "scheduler", "autoscaler")
HEARTBEAT = "heartbeat"
BATCH = "batch"
"""The kind of a batch of actor events (`subjects.batch_subject`)."""


READ_PREFIXES = (f"{s.PREFIX}.req.", f"{s.PREFIX}.cmd.", f"{s.PREFIX}.q.")


def targets() -> list[Target]:
    """Every subject a service reads: each aggregate's events, each request, command and query subject (every
    `corral.req.`, `corral.cmd.` and `corral.q.` constant of `schemas.subjects`), the digest and health queries,
    heartbeats."""
    found = [Target(s.event_subject(aggregate, name), "log", aggregate) for aggregate in EVENTS for name in ("x", "n0")]
    found.append(Target(s.ELECTIONS, "log", s.SCHEDULER))
    found.append(Target(s.batch_subject(s.ACTOR), "log", BATCH))
    found.append(Target(s.AUTOSCALER_DECISIONS, "log", s.AUTOSCALER))
    for value in vars(s).values():
        if isinstance(value, str) and value.startswith(READ_PREFIXES) and not value.endswith((".*", ".>")):
            via: Via = "request" if value.startswith(f"{s.PREFIX}.req.") else "ask"
            found.append(Target(value, via, value))
    found += [Target(s.digest_subject(service), "ask", "digest") for service in SERVICES]
    found += [Target(s.health_subject(service), "ask", "health") for service in SERVICES]
    found += [Target(s.heartbeat_subject(node), "heartbeat", HEARTBEAT) for node in ("n0", "ghost")]
    return found


def well_formed(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    """A well-formed message of `kind` (an aggregate's event, a subject's message, a heartbeat); an empty object
    for a subject without a template here (a digest or health query, or a subject added since)."""
    if kind in EVENTS:
        return EVENTS[kind]
    if kind == HEARTBEAT:
        return struct(node_id=ids(NODES))
    return MESSAGES.get(kind, struct())


ALL_KINDS = sorted({*EVENTS, *MESSAGES, HEARTBEAT})
WRONG_VALUES = st.sampled_from([None, 7, -3, "text", [], {}, True, 2.5, [1, [2]], {"nested": {"x": 1}}])


def dumps(message: Any) -> bytes:
    """Compact JSON bytes."""
    return json.dumps(message, separators=(",", ":")).encode()


def unknown_field(message: dict[str, Any]) -> st.SearchStrategy[Payload]:
    """The message with a field no struct declares."""
    return st.sampled_from(["resourcez", "zzz", "type2"]).map(
        lambda name: Payload("unknown field", name, dumps({**message, name: 1}))
    )


def wrong_type(message: dict[str, Any]) -> st.SearchStrategy[Payload]:
    """The message with one field holding a value of another type."""
    if not message:
        return st.just(Payload("wrong type", "an array where an object belongs", b"[]"))
    return st.tuples(st.sampled_from(sorted(message)), WRONG_VALUES).map(
        lambda pair: Payload("wrong type", pair[0], dumps({**message, pair[0]: pair[1]}))
    )


def bad_amount(message: dict[str, Any]) -> st.SearchStrategy[Payload]:
    """The message with its amounts (resources, epoch, or an added CPU) negative, NaN, infinite or huge."""
    marker = "@@AMOUNT@@"

    def mark(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                key: marker if isinstance(item, int | float) and not isinstance(item, bool) else mark(item)
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [mark(item) for item in value]
        return value

    marked = dumps(mark(message))
    if marker.encode() not in marked:
        marked = dumps({**message, "resources": {"CPU": marker}})
    return st.sampled_from(BAD_NUMBERS).map(
        lambda number: Payload("bad amount", number, marked.replace(f'"{marker}"'.encode(), number.encode()))
    )


def invalid_utf8(message: dict[str, Any]) -> st.SearchStrategy[Payload]:
    """The message with invalid UTF-8 bytes inside a string (a field value, or an added key)."""
    marker = "@@UTF8@@"
    strings = [key for key, value in message.items() if isinstance(value, str) and key not in ("type", "kind")]
    marked = dumps({**message, strings[0] if strings else "note": marker})
    return st.sampled_from(BAD_UTF8).map(
        lambda bad: Payload("invalid UTF-8", repr(bad), marked.replace(marker.encode(), b"x" + bad + b"y"))
    )


def deeply_nested(message: dict[str, Any]) -> st.SearchStrategy[Payload]:
    """The message with one field nested thousands of levels deep (objects or arrays), or the nesting alone."""

    def build(depth: int, arrays: bool, alone: bool) -> Payload:
        opening, closing = (b"[", b"]") if arrays else (b'{"a":', b"}")
        nested = opening * depth + b"1" + closing * depth
        if alone or not message:
            return Payload("deep nesting", f"{depth} levels alone", nested)
        field = sorted(message)[-1]
        marked = dumps({**message, field: "@@DEEP@@"})
        return Payload("deep nesting", f"{depth} levels in {field}", marked.replace(b'"@@DEEP@@"', nested))

    return st.builds(build, st.sampled_from([100, 1_000, 10_000, 100_000]), st.booleans(), st.booleans())


def oversized(message: dict[str, Any]) -> st.SearchStrategy[Payload]:
    """The message with a string field padded past what a service accepts (256 KiB), under NATS's 1 MB."""
    field = next((key for key, value in message.items() if isinstance(value, str) and key != "type"), "padding")

    def build(size: int) -> Payload:
        return Payload("oversized", f"{size:,} bytes in {field}", dumps({**message, field: "x" * size}))

    return st.builds(build, st.integers(min_value=270_000, max_value=OVERSIZED_LIMIT))


def forged_election() -> st.SearchStrategy[Payload]:
    """A `SchedulerElected` no lease produced: a huge (or negative) epoch, any instance name."""
    return st.builds(
        lambda epoch, instance: Payload(
            "forged election", str(epoch), dumps({"type": "SchedulerElected", "epoch": epoch, "instance": instance})
        ),
        st.one_of(st.integers(min_value=1_000_000, max_value=2**63 - 1), st.integers(max_value=-1)),
        st.text(max_size=20),
    )


def random_bytes() -> st.SearchStrategy[Payload]:
    """Anything at all."""
    return st.binary(max_size=4_096).map(lambda data: Payload("random bytes", "", data))


MUTATIONS = (unknown_field, wrong_type, bad_amount, invalid_utf8, deeply_nested, oversized)


def spoil(message: dict[str, Any]) -> st.SearchStrategy[Payload]:
    """The message mutated one way or another (`MUTATIONS`)."""
    return st.sampled_from(MUTATIONS).flatmap(lambda mutate: mutate(message))


def batch_payloads() -> st.SearchStrategy[Payload]:
    """A batch of actor events: well-formed, with one spoiled event among good ones, empty, or another kind's message
    or random bytes where the array belongs."""
    events = EVENTS[s.ACTOR].map(dumps)

    def joined(parts: list[bytes]) -> bytes:
        return b"[" + b",".join(parts) + b"]"

    spoiled = st.tuples(st.lists(events, max_size=3), EVENTS[s.ACTOR].flatmap(spoil), st.integers(0, 3)).map(
        lambda found: Payload(
            "batch with a bad event",
            f"{found[1].family} at {min(found[2], len(found[0]))}",
            joined([*found[0][: found[2]], found[1].data, *found[0][found[2] :]]),
        )
    )
    return st.one_of(
        st.lists(events, min_size=1, max_size=4).map(lambda parts: Payload("well-formed", BATCH, joined(parts))),
        spoiled,
        st.just(Payload("empty batch", "", b"[]")),
        st.sampled_from(ALL_KINDS)
        .flatmap(well_formed)
        .map(lambda message: Payload("not an array", "", dumps(message))),
        random_bytes(),
    )


def payloads(target: Target) -> st.SearchStrategy[Payload]:
    """Any payload for `target`: its own message valid or mutated, another kind's message (valid or mutated),
    a forged election, or random bytes (for a batch subject, `batch_payloads`)."""
    if target.kind == BATCH:
        return batch_payloads()
    own = well_formed(target.kind)
    other = st.sampled_from(ALL_KINDS).flatmap(well_formed)

    return st.one_of(
        own.map(lambda message: Payload("well-formed", target.kind, dumps(message))),
        own.flatmap(spoil),
        other.map(lambda message: Payload("wrong message", str(message.get("type", "")), dumps(message))),
        other.flatmap(spoil),
        forged_election(),
        random_bytes(),
    )


sends = st.sampled_from(targets()).flatmap(lambda target: st.tuples(st.just(target), payloads(target)))
"""One message to send: where, and what."""
