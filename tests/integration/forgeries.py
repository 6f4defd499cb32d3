"""Hypothesis strategies for the applier's subject (`corral.plan.scheduler`): proposal batches anyone on an open bus
could send, built well-formed and then forged or broken.

A batch is drawn against what the mesh holds now (`Scene`): forged proposals of real or made-up requests (actors,
placement groups, work in a virtual cluster, removals, failures) on a live, full, tainted, labelled, removed,
virtual, ghost or empty node, naming the sequence of a real request, of the next one, or an impossible one, with
any generator state and any inbox (a client's, a Corral or JetStream subject, a malformed one), folded ahead of or
behind the log, under odd worker names; duplicated, many at once; then sent as they are or broken by
`payloads.py`'s mutations; or a flood of thousands of tiny proposals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
from hypothesis import strategies as st

from schemas import PlacementGroupRequest, ScheduleRequest
from schemas import subjects as s
from schemas.commands import (
    MAX_BATCH,
    CreatePlacementGroup,
    RemoveActor,
    RemovePlacementGroup,
    ReportActorFailed,
    SchedulerRequest,
    SubmitActor,
)
from schemas.proposals import Proposal, Proposals
from schemas.requests import NodeAffinitySchedulingStrategy, PlacementGroupSchedulingStrategy
from tests.integration.payloads import MUTATIONS, Payload, dumps, random_bytes

LIVE_NODE, FULL_NODE, GHOST_NODE = "n-live", "n-full", "n-ghost"
TAINTED_NODE, LABELLED_NODE, REMOVED_NODE = "n-tainted", "n-labelled", "n-removed"
"""Nodes with room that some requests may not use: tainted (none tolerates it), labelled `LABELS` (the only node a
selective request may use), taken out."""
LABELS = {"tier": "db"}
RESIDENT = "resident"
"""A real actor that fills `FULL_NODE` (forged removals and failures may name it)."""
CLUSTER = "vc0"
ACTORS = (*(f"f{index}" for index in range(10)), RESIDENT, "ghost-actor")
GROUPS = ("pg0", "pg1", "ghost-pg")
CLUSTERS = (CLUSTER, "ghost-vc")

WATCHED = (
    s.event_subject(s.ACTOR, "inbox-target"),
    f"{s.PREFIX}.req.inbox-target",
    s.REMOVE_NODE,
    f"$JS.API.STREAM.PURGE.{s.EVENTS_STREAM}",
    f"$JS.API.STREAM.DELETE.{s.REQUESTS_STREAM}",
)
"""Corral and JetStream subjects a forger names as its inbox or reply subject: the applier must never publish to
them (nothing else in the fuzz does either, so anything seen there came from the applier)."""
MALFORMED_INBOXES = ("has space", "tab\there", "crlf\r\nPUB corral.evt.actor.x 2\r\nhi", "wild.*", ">", "x" * 2_000)
"""Inboxes NATS would refuse or misread (a proposal's inbox is any string)."""
HUGE = 2**63 - 1


@dataclass(frozen=True)
class Scene:
    """What the mesh holds when a batch is drawn."""

    log_end: int
    """The event log's last sequence."""
    requests_end: int
    """The last sequence of `CORRAL_REQUESTS` (the next real request gets the one after)."""
    client_inbox: str
    """An inbox of the fuzzer's own (it reads nothing there: a reply may go to it)."""
    fresh: tuple[str, ...]
    """Actor ids new to this batch (the fuzzer removes them after it, so forged work keeps finding room)."""
    real: ScheduleRequest
    """The real request sent beside this batch (a forgery may propose it too, or remove it)."""
    virtual_nodes: tuple[str, ...]
    """The ids of the virtual cluster's nodes (a forgery may name one for work at the root)."""


resources = st.fixed_dictionaries({"CPU": st.sampled_from([0.5, 1.0, 1.0, 4.0, 100.0])})


def requests(scene: Scene) -> st.SearchStrategy[SchedulerRequest]:
    """A real or made-up request: a new actor (mostly a plain one at the root, which a worker would propose; else in
    a virtual cluster, in a placement group's bundle, on a named node), a placement group, a removal or a failure."""
    strategy = st.one_of(
        st.sampled_from([None, None, None, "SPREAD", "DEFAULT"]),
        st.builds(NodeAffinitySchedulingStrategy, st.sampled_from([LIVE_NODE, FULL_NODE, GHOST_NODE]), st.booleans()),
        st.builds(PlacementGroupSchedulingStrategy, st.sampled_from(GROUPS), st.sampled_from([-1, 0, 1, 5])),
    )
    cluster = st.sampled_from([None, None, None, *CLUSTERS])
    actor = st.builds(
        ScheduleRequest, st.sampled_from(ACTORS), resources, scheduling_strategy=strategy, vcluster_id=cluster
    )
    group = st.builds(
        PlacementGroupRequest, st.sampled_from(GROUPS), st.lists(resources, min_size=1, max_size=2), vcluster_id=cluster
    )
    plain = st.builds(ScheduleRequest, st.sampled_from(scene.fresh) | st.sampled_from(ACTORS), resources) | st.just(
        scene.real
    )
    selective = st.builds(
        ScheduleRequest, st.sampled_from(scene.fresh), resources, label_selector=st.just({"tier": "in(db)"})
    )
    kinds: list[st.SearchStrategy[SchedulerRequest]] = [
        st.builds(SubmitActor, request=plain),
        st.builds(SubmitActor, request=plain),
        st.builds(SubmitActor, request=actor),
        st.builds(SubmitActor, request=selective),
        st.builds(CreatePlacementGroup, request=group),
        st.builds(RemoveActor, actor_id=st.sampled_from([*ACTORS, scene.real.actor_id])),
        st.builds(ReportActorFailed, actor_id=st.sampled_from([*ACTORS, scene.real.actor_id])),
        st.builds(RemovePlacementGroup, pg_id=st.sampled_from(GROUPS)),
    ]
    return st.sampled_from(kinds).flatmap(lambda kind: kind)


def proposals(scene: Scene) -> st.SearchStrategy[Proposal]:
    """One forged proposal."""
    sequence = st.sampled_from(
        [max(1, scene.requests_end), scene.requests_end + 1, scene.requests_end + 2, 0, -1, HUGE]
    ) | st.integers(min_value=-(2**63), max_value=HUGE)
    inbox = st.sampled_from(["", scene.client_inbox, *WATCHED, *MALFORMED_INBOXES])
    nodes = [LIVE_NODE, FULL_NODE, GHOST_NODE, TAINTED_NODE, LABELLED_NODE, REMOVED_NODE, *scene.virtual_nodes]
    node = st.sampled_from(["", *nodes])
    prng = st.sampled_from([-1, 0, 2**64 - 1]) | st.integers(min_value=-1, max_value=2**64 - 1)
    place = st.sampled_from([0, 0, 1, 2, MAX_BATCH]) | st.integers(min_value=0, max_value=MAX_BATCH)
    return st.builds(Proposal, requests(scene), sequence, inbox, node, prng, place)


@st.composite
def batches(draw: st.DrawFn, scene: Scene) -> Proposals:
    """A well-formed batch of forged proposals: a few, some of them twice, or many."""
    forged = draw(st.lists(proposals(scene), max_size=6))
    repeated: bool = draw(st.booleans())
    if forged and repeated:
        forged += draw(st.lists(st.sampled_from(forged), min_size=1, max_size=4))  # the same proposal again
    if draw(st.integers(0, 9)) == 0:
        forged = forged * draw(st.integers(10, 40)) or forged  # many at once
    worker = draw(st.sampled_from(["decider-1", "", "fuzz", "é\u2028\x00", "w" * 300]) | st.text(max_size=20))
    folded = draw(st.sampled_from([0, -1, scene.log_end, scene.log_end + 1_000, HUGE]))
    return Proposals(worker, folded, forged)


SIZES = st.integers(min_value=100_000, max_value=1_000_000)
"""Sizes of a flood of proposals: up to what NATS carries (1 MiB)."""
TINY = b'{"request":{"kind":"%s","actor_id":"%s"},"request_sequence":%d}'
"""A proposal without its defaults: about 70 bytes, refused with a longer reason."""


def flood() -> st.SearchStrategy[Payload]:
    """Thousands of tiny proposals, removals or failures of actors that do not exist, up to about 1 MB: together
    refused at greater length than the bus carries in one message."""

    def build(kind: bytes, actor: bytes, first: int, size: int) -> Payload:
        count = size // (len(TINY % (kind, actor, first + 10**6)) + 1)
        proposals = b",".join(TINY % (kind, actor, first + index) for index in range(count))
        data = b'{"worker":"flood","folded":0,"proposals":[%s]}' % proposals
        return Payload("flood", f"{count:,} {kind.decode()} of {actor.decode()}", data)

    kinds = st.sampled_from([b"fail_actor", b"remove_actor"])
    return st.builds(build, kinds, st.sampled_from([b"g", b"ghost-actor"]), st.integers(0, 10**6), SIZES)


@st.composite
def hostile_batches(draw: st.DrawFn, scene: Scene) -> Payload:
    """A forged batch as it is, or broken (an unknown field, a wrong type, a bad amount, a generator state wider
    than 64 bits, invalid UTF-8, deep nesting, oversized), or random bytes, or a flood of tiny proposals."""
    batch = draw(batches(scene))
    message: dict[str, Any] = msgspec.to_builtins(batch)
    kind = draw(st.sampled_from(["well-formed", "well-formed", "broken", "random", "flood"]))
    if kind == "well-formed":
        return Payload("well-formed", f"{len(batch.proposals)} proposals", dumps(message))
    if kind == "broken":
        if message["proposals"] and draw(st.integers(0, 4)) == 0:  # a generator state wider than 64 bits
            wide = draw(st.integers(min_value=2**64, max_value=2**256))
            message["proposals"][draw(st.integers(0, len(message["proposals"]) - 1))]["prng"] = wide
            return Payload("wide prng", f"a proposal's prng {wide}", dumps(message))
        if message["proposals"] and draw(st.integers(0, 4)) == 0:  # a place outside any batch
            outside = draw(st.sampled_from([-1, MAX_BATCH + 1, 2**63]))
            message["proposals"][draw(st.integers(0, len(message["proposals"]) - 1))]["place"] = outside
            return Payload("bad place", f"a proposal's place {outside}", dumps(message))
        broken: Payload = draw(st.sampled_from(MUTATIONS).flatmap(lambda mutate: mutate(message)))
        return broken
    return draw(random_bytes() if kind == "random" else flood())


def reply_subjects(scene: Scene) -> st.SearchStrategy[str]:
    """The reply subject a batch is sent with: the fuzzer's inbox, none, or a Corral or JetStream subject."""
    return st.sampled_from([scene.client_inbox, "", *WATCHED])
