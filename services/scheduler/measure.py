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


_decisions: dict[tuple[type, type], int] = {}
"""(request type, reply type) -> decisions so far: a plain count, read as a counter by outcome and kind at collection
(the SDK's counter would check and hash the attributes of every decision, about 4 µs each)."""


def counted(request: object, reply: RequestReply) -> None:
    """Count one decision by outcome and kind."""
    key = (type(request), type(reply))
    _decisions[key] = _decisions.get(key, 0) + 1


def timed(seconds: float, stored_ns: int) -> None:
    """Record how long one message of the work queue (a request, or a batch of them) took to decide, and how long
    since it was stored (`stored_ns`, nanoseconds since the epoch; 0 when unknown). Once per message, not per request
    of a batch: each sample costs the OpenTelemetry SDK about 4 us. The histograms carry no attributes: attributes
    cost more than the recording itself."""
    metrics.DECISION_SECONDS.record(seconds)
    if stored_ns:
        metrics.REQUEST_SECONDS.record(max(0.0, (time.time_ns() - stored_ns) / 1e9))


def _decision_counts() -> Iterable[tuple[float, metrics.Attributes]]:
    return [
        (count, {"outcome": _snake(reply.__name__), "kind": _snake(request.__name__)})
        for (request, reply), count in list(_decisions.items())
    ]


def stored_at(reply_subject: str) -> int:
    """When JetStream stored a request (ns since the epoch), from its ack subject; 0 when it does not say."""
    # $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>
    tokens = reply_subject.split(".")
    return int(tokens[7]) if len(tokens) == 9 and tokens[1] == "ACK" else 0


def observe(view: SchedulerView) -> None:
    """Decisions by outcome and kind; gauges of the view: pending work by its first reason, the leader's epoch."""
    metrics.total(
        "corral.scheduler.decisions", "{decision}", "Decisions by outcome and kind of request", _decision_counts
    )
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
