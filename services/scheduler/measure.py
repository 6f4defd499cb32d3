"""The scheduler's metrics: each decision counted and timed, and gauges of its view read at collection."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable

from schemas.replies import RequestReply
from services.core.state.view import ClusterView
from services.runtime import metrics
from services.scheduler.view import SchedulerView


class Unreadable:
    """The kind of a request that could not be decoded."""


UNREADABLE = Unreadable()


_attributes: dict[tuple[type, type], metrics.Attributes] = {}
"""(request type, reply type) -> the decision's attributes, made once per pair so a decision allocates none."""


def decided(request: object, reply: RequestReply, seconds: float, stored_ns: int) -> None:
    """Count one decision by outcome and kind; record how long it took, and how long since its request was stored
    in the work queue (`stored_ns`, nanoseconds since the epoch; 0 when unknown)."""
    key = (type(request), type(reply))
    attributes = _attributes.get(key)
    if attributes is None:
        attributes = _attributes[key] = {"outcome": _snake(key[1].__name__), "kind": _snake(key[0].__name__)}
    metrics.DECISIONS.add(1, attributes)
    metrics.DECISION_SECONDS.record(seconds, attributes)
    if stored_ns:
        metrics.REQUEST_SECONDS.record(max(0.0, (time.time_ns() - stored_ns) / 1e9), attributes)


def stored_at(reply_subject: str) -> int:
    """When JetStream stored a request (ns since the epoch), from its ack subject; 0 when it does not say."""
    # $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>
    tokens = reply_subject.split(".")
    return int(tokens[7]) if len(tokens) == 9 and tokens[1] == "ACK" else 0


def observe(view: SchedulerView) -> None:
    """Gauges of the view: pending work by its first reason, the leader's epoch."""
    metrics.gauge(
        "corral.scheduler.pending",
        "{work}",
        "Pending actors and placement groups by first reason",
        lambda: _pending(view),
    )
    metrics.gauge(
        "corral.leader.epoch", "", "The scheduler epoch the view follows", metrics.one(lambda: view.cluster.view.epoch)
    )
    metrics.gauge(
        "corral.leader.leading",
        "1",
        "1 while this process is the leading scheduler",
        metrics.one(lambda: int(view.leading)),
    )


def _pending(view: SchedulerView) -> Iterable[tuple[float, metrics.Attributes]]:
    root = view.cluster.view
    counts: dict[str, int] = {}
    for scope in (root, *(vc.scope for vc in root.tree.clusters.values())):
        for work_id in scope.pending:
            reason = _first_reason(scope, work_id)
            counts[reason] = counts.get(reason, 0) + 1
    return [(count, {"reason": reason}) for reason, count in counts.items()]


def _first_reason(scope: ClusterView, work_id: str) -> str:
    work = scope.actors.get(work_id) or scope.groups.get(work_id)
    explanation = work.explanation if work is not None else None
    if explanation is None:
        return "not decided yet"
    return explanation.group_reason or next(iter(explanation.reasons), "unexplained")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
