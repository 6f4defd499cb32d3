"""Actor affinity and anti-affinity over actor labels, per topology domain, with symmetric hard anti-affinity (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from schemas import ActorAffinityMatchExpression, ActorAffinityOperator, ActorAffinitySchedulingStrategy
from services.core.framework.plugin import RANK_ACTOR_AFFINITY, RANK_EXISTING_ANTI, Filter, Scorer
from services.core.framework.registry import Prepared, Rule, register
from services.core.labels import NODE_ID
from services.core.request import CompiledRequest
from services.core.ring import Chain
from services.core.state import ClusterView, NodeState

AFFINITY_REASON: Final = "didn't match actor affinity rules"
ANTI_AFFINITY_REASON: Final = "didn't match actor anti-affinity rules"
EXISTING_ANTI_REASON: Final = "didn't satisfy existing actors' anti-affinity rules"
SOFT_WEIGHT: Final = 100
_IN: Final = ActorAffinityOperator.IN
_EXISTS: Final = ActorAffinityOperator.EXISTS
_POSITIVE: Final = (_IN, _EXISTS)
_ANY_VALUE: Final = (_EXISTS, ActorAffinityOperator.DOES_NOT_EXIST)
"""Operators read once: compiled, each read of an Enum class's member goes through `EnumType.__getattr__`."""


class Expression:
    """One match expression resolved against the placed actors: the domains holding a matching actor."""

    __slots__ = ("domains", "positive", "topology")

    def __init__(self, view: ClusterView, namespace: str, expression: ActorAffinityMatchExpression) -> None:
        self.topology = expression.topology_key
        self.positive = expression.operator in _POSITIVE
        if expression.operator in _ANY_VALUE:
            self.domains: set[str] | dict[str, int] = view.actor_domains(
                (namespace, expression.key, None), self.topology
            )
        else:
            found: set[str] = set()
            for value in expression.values:
                found.update(view.actor_domains((namespace, expression.key, value), self.topology))
            self.domains = found

    def holds(self, node: NodeState) -> bool:
        """IN / EXISTS: the node's domain hosts a match; NOT_IN / DOES_NOT_EXIST: it does not."""
        domain = node.labels.get(self.topology)
        if self.positive:
            return domain is not None and domain in self.domains
        return domain is None or domain not in self.domains

    def nodes(self, view: ClusterView) -> Sequence[str]:
        """The nodes in the domains of a positive expression (via the label index)."""
        if self.topology == NODE_ID:
            live = [node_id for node_id in self.domains if node_id in view.nodes]
            return sorted(live, key=lambda node_id: view.nodes[node_id].hash_key)
        rings = [view.labels.nodes(self.topology, domain) for domain in sorted(self.domains)]
        return Chain([ring.ids for ring in rings if ring is not None])


def _self_satisfies(labels: dict[str, str], expression: ActorAffinityMatchExpression) -> bool:
    value = labels.get(expression.key)
    if expression.operator == _EXISTS:
        return value is not None
    return value is not None and value in expression.values


def _placed_actor_satisfies_all(
    view: ClusterView, namespace: str, expressions: list[ActorAffinityMatchExpression]
) -> bool:
    """Whether one placed actor of the namespace matches every expression (only nodes hosting all can hold it)."""
    hosts: set[str] | None = None
    for expression in expressions:
        value_keys = expression.values if expression.operator == _IN else [None]
        found: set[str] = set()
        for value in value_keys:
            found.update(view.actor_index.domains((namespace, expression.key, value), NODE_ID))
        hosts = found if hosts is None else hosts & found
        if not hosts:
            return False
    if len(expressions) == 1:  # the index lists only hosts of an actor matching it: no actor need be read
        return True
    for node_id in sorted(hosts or ()):
        host = view.node(node_id)
        for actor_id in host.actors if host is not None else ():
            request = view.actors[actor_id].request
            if request.namespace == namespace and all(_self_satisfies(request.labels, e) for e in expressions):
                return True
    return False


class ActorAffinityFilter(Filter):
    """Hard expressions: all must hold (any, with `is_or_semantics`)."""

    rank = RANK_ACTOR_AFFINITY

    def __init__(
        self, view: ClusterView, namespace: str, labels: dict[str, str], strategy: ActorAffinitySchedulingStrategy
    ) -> None:
        hard = [e for e in strategy.match_expressions if not e.soft]
        self.any_of = strategy.is_or_semantics
        self.expressions = [Expression(view, namespace, e) for e in hard]
        positive = [(raw, resolved) for raw, resolved in zip(hard, self.expressions, strict=True) if resolved.positive]
        first_of_group = (
            bool(positive)
            and all(_self_satisfies(labels, raw) for raw, _ in positive)
            and not _placed_actor_satisfies_all(view, namespace, [raw for raw, _ in positive])
        )
        if first_of_group:  # with OR semantics one satisfied expression is enough, so nothing is left to check
            self.expressions = [] if self.any_of else [e for e in self.expressions if not e.positive]
        self.active = bool(self.expressions)
        self.reason = AFFINITY_REASON if any(e.positive for e in self.expressions) else ANTI_AFFINITY_REASON
        unmet = [e.positive and (e.topology == NODE_ID or not e.domains) for e in self.expressions]
        self.new_nodes_fail = self.active and (all(unmet) if self.any_of else any(unmet))
        if not self.any_of:
            narrowed = [e.nodes(view) for e in self.expressions if e.positive]
            self.candidates = min(narrowed, key=len) if narrowed else None

    def check(self, node: NodeState) -> str | None:
        if self.any_of:
            return None if any(e.holds(node) for e in self.expressions) else self.reason
        for expression in self.expressions:
            if not expression.holds(node):
                return AFFINITY_REASON if expression.positive else ANTI_AFFINITY_REASON
        return None


class ActorAffinityScorer(Scorer):
    """100 for each soft expression the node satisfies."""

    def __init__(self, view: ClusterView, namespace: str, strategy: ActorAffinitySchedulingStrategy) -> None:
        self.expressions = [Expression(view, namespace, e) for e in strategy.match_expressions if e.soft]
        self.preferred = Chain([e.nodes(view) for e in self.expressions if e.positive])
        self.exhaustive = not all(e.positive for e in self.expressions)
        self.ceiling = SOFT_WEIGHT * len(self.expressions)
        self.active = bool(self.expressions)

    def weight(self, node: NodeState) -> int:
        return SOFT_WEIGHT * sum(1 for e in self.expressions if e.holds(node))


class ExistingAntiAffinityFilter(Filter):
    """Placed actors' hard NOT_IN / DOES_NOT_EXIST rules keep matching newcomers out of their domains."""

    rank = RANK_EXISTING_ANTI

    def __init__(self, view: ClusterView, namespace: str, labels: dict[str, str]) -> None:
        excluded: dict[str, set[str]] = {}
        counts = view.anti_index.counts
        for key, value in labels.items():
            for entry in ((namespace, key, value), (namespace, key, None)):
                for topology, domains in counts.get(entry, {}).items():
                    excluded.setdefault(topology, set()).update(domains)
        self.excluded = excluded
        self.active = bool(excluded)

    def check(self, node: NodeState) -> str | None:
        labels = node.labels
        for topology, domains in self.excluded.items():
            if labels.get(topology) in domains:
                return EXISTING_ANTI_REASON
        return None


def for_actor(view: ClusterView, work: CompiledRequest) -> Prepared:
    """The ActorAffinity strategy's hard and soft expressions, then placed actors' anti-affinity to this one."""
    request = work.request
    rules: list[Filter | Scorer] = []
    if work.affinity is not None:
        affinity = ActorAffinityFilter(view, request.namespace, request.labels, work.affinity)
        if affinity.active:
            rules.append(affinity)
        soft = ActorAffinityScorer(view, request.namespace, work.affinity)
        if soft.active:
            rules.append(soft)
    if request.labels:
        existing = ExistingAntiAffinityFilter(view, request.namespace, request.labels)
        if existing.active:
            rules.append(existing)
    return rules


register(Rule(__name__, RANK_ACTOR_AFFINITY, actor=for_actor))
