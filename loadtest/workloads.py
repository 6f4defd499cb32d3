"""Workload definitions with weights: the scheduling requests a simulated user sends, small so most of them place."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from loadtest.nodes import TAINT
from schemas import (
    ActorAffinityMatchExpression,
    ActorAffinityOperator,
    ActorAffinitySchedulingStrategy,
    ScheduleRequest,
)

SMALL = {"CPU": 0.5, "memory": 0.5}
"""What most requests ask for: a 1,000-node cluster holds thousands of these."""

GROUP_SIZE = 4
"""Actors per affinity group: the first of a group goes anywhere, the others join it."""


@dataclass(frozen=True)
class Ticket:
    """What a workload needs to build one request: a unique actor id, the sending user and its request count."""

    actor_id: str
    user: str
    sequence: int


@dataclass(frozen=True)
class Workload:
    """One kind of request, drawn with probability proportional to `weight`."""

    name: str
    weight: int
    summary: str
    build: Callable[[Ticket], ScheduleRequest]


def _plain(ticket: Ticket) -> ScheduleRequest:
    return ScheduleRequest(ticket.actor_id, SMALL)


def _ssd(ticket: Ticket) -> ScheduleRequest:
    return ScheduleRequest(ticket.actor_id, SMALL, label_selector={"disk": "ssd"})


def _tolerate(ticket: Ticket) -> ScheduleRequest:
    return ScheduleRequest(ticket.actor_id, SMALL, tolerations={TAINT.key: TAINT.value})


def _spread(ticket: Ticket) -> ScheduleRequest:
    return ScheduleRequest(ticket.actor_id, SMALL, scheduling_strategy="SPREAD")


def _affinity(operator: ActorAffinityOperator, *, soft: bool) -> Callable[[Ticket], ScheduleRequest]:
    """Affinity (IN) to the user's current group, or anti-affinity (NOT_IN) to the user's other actors of this kind."""
    key = "group" if operator is ActorAffinityOperator.IN else "anti"

    def build(ticket: Ticket) -> ScheduleRequest:
        if operator is ActorAffinityOperator.IN:
            value = f"{ticket.user}g{ticket.sequence // GROUP_SIZE}{'s' if soft else 'h'}"
        else:
            value = f"{ticket.user}{'s' if soft else 'h'}"
        expression = ActorAffinityMatchExpression(key, operator, [value], soft)
        return ScheduleRequest(
            ticket.actor_id,
            SMALL,
            labels={key: value},
            scheduling_strategy=ActorAffinitySchedulingStrategy([expression]),
        )

    return build


WORKLOADS: tuple[Workload, ...] = (
    Workload("plain", 30, "CPU and memory only", _plain),
    Workload("ssd", 15, "label selector disk=ssd", _ssd),
    Workload("tolerate", 10, f"tolerates the {TAINT.key}={TAINT.value} taint", _tolerate),
    Workload("spread", 15, "SPREAD: the least utilised node", _spread),
    Workload("affinity_soft", 8, "soft actor affinity IN group", _affinity(ActorAffinityOperator.IN, soft=True)),
    Workload("affinity_hard", 8, "hard actor affinity IN group", _affinity(ActorAffinityOperator.IN, soft=False)),
    Workload("anti_soft", 8, "soft anti-affinity NOT_IN user", _affinity(ActorAffinityOperator.NOT_IN, soft=True)),
    Workload("anti_hard", 6, "hard anti-affinity NOT_IN user", _affinity(ActorAffinityOperator.NOT_IN, soft=False)),
)
"""Every workload; weights add up to 100."""

REMOVE = "remove_actor"
"""The name removes are reported under."""


class Mix:
    """Draws workloads by weight from a seeded generator (one per user, so runs repeat)."""

    def __init__(self, seed: int, workloads: tuple[Workload, ...] = WORKLOADS) -> None:
        self.random = random.Random(seed)
        self.workloads = workloads
        self.weights = [workload.weight for workload in workloads]

    def draw(self) -> Workload:
        """The next workload."""
        return self.random.choices(self.workloads, self.weights)[0]
