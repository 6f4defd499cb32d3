"""NATS subject names, stream names and buckets: the addresses of the wire contract."""

from __future__ import annotations

import re

PREFIX = "corral"

EVENTS_STREAM = "CORRAL_EVENTS"
"""The event log of record (file storage): every `corral.evt.>` subject."""
EVENTS_SUBJECTS = f"{PREFIX}.evt.>"

REQUESTS_STREAM = "CORRAL_REQUESTS"
"""The scheduler's durable work queue: every `corral.req.>` subject."""
REQUESTS_SUBJECTS = f"{PREFIX}.req.>"
REQUESTS_CONSUMER = "scheduler"

DEAD_LETTERS_STREAM = "CORRAL_DEAD_LETTERS"
"""Events and requests no service could decode or apply, kept for inspection."""
DEAD_LETTERS_SUBJECTS = f"{PREFIX}.dlq.>"

LEASE_BUCKET = "corral_leases"
"""NATS KV bucket holding the scheduler lease (a key with a TTL)."""
SCHEDULER_LEASE_KEY = "scheduler"

REPLY_HEADER = "Corral-Reply-To"
"""Header on a durable request naming the inbox the decision is sent to."""

# aggregates: the token after `corral.evt.`
NODE = "node"
TAINT = "taint"
ACTOR = "actor"
PLACEMENT_GROUP = "pg"
SCHEDULER = "scheduler"
VCLUSTER = "vc"

_SAFE_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,200}")


def token(identifier: str) -> str:
    """An id as one subject token: itself when it is safe, else `~` and its UTF-8 bytes in hex."""
    if _SAFE_TOKEN.fullmatch(identifier):
        return identifier
    return "~" + identifier.encode().hex()


def event_subject(aggregate: str, identifier: str) -> str:
    """`corral.evt.<aggregate>.<id>`: where the events of one aggregate are appended."""
    return f"{PREFIX}.evt.{aggregate}.{token(identifier)}"


def command_subject(service: str, verb: str) -> str:
    """`corral.cmd.<service>.<verb>`: request/reply commands, one queue group per service."""
    return f"{PREFIX}.cmd.{service}.{verb}"


def query_subject(service: str, what: str) -> str:
    """`corral.q.<service>.<what>`: request/reply queries answered from a view."""
    return f"{PREFIX}.q.{service}.{what}"


def request_subject(kind: str) -> str:
    """`corral.req.<kind>`: durable scheduler requests captured by `CORRAL_REQUESTS`."""
    return f"{PREFIX}.req.{kind}"


def heartbeat_subject(node_id: str) -> str:
    """`corral.hb.<node>`: a node agent's heartbeat (plain publish)."""
    return f"{PREFIX}.hb.{token(node_id)}"


def dead_letter_subject(service: str) -> str:
    """`corral.dlq.<service>`: where a service puts a message it could not decode or apply."""
    return f"{PREFIX}.dlq.{service}"


HEARTBEATS = f"{PREFIX}.hb.*"

# commands
LABELS = "labels"
TAINTS = "taints"
REGISTER_NODE = command_subject(LABELS, "register")
SET_LABELS = command_subject(LABELS, "set_labels")
REMOVE_NODE = command_subject(LABELS, "remove")
ADD_TAINTS = command_subject(TAINTS, "add")
REMOVE_TAINTS = command_subject(TAINTS, "remove")

# durable scheduler requests
SCHEDULE = request_subject("schedule")
CREATE_PLACEMENT_GROUP = request_subject("placement_group")
REMOVE_ACTOR = request_subject("remove_actor")
REPORT_ACTOR_FAILED = request_subject("fail_actor")
REMOVE_PLACEMENT_GROUP = request_subject("remove_placement_group")

# queries
NODES_QUERY = query_subject(LABELS, "nodes")
ACTORS_QUERY = query_subject(LABELS, "actors")
TAINTS_QUERY = query_subject(TAINTS, "taints")
STATUS_QUERY = query_subject(SCHEDULER, "status")
DECISION_QUERY = query_subject(SCHEDULER, "decision")


def digest_subject(service: str) -> str:
    """`corral.q.<service>.digest`: the digest of a service's view."""
    return query_subject(service, "digest")
