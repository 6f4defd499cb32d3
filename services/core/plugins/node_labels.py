"""Node label rules: `label_selector`, NodeLabel hard (filters) and soft (scores), driven by the label index (pure)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Final

from services.core.framework.plugin import RANK_NODE_LABELS, RANK_SELECTOR, Filter, Scorer
from services.core.framework.registry import Prepared, Rule, register
from services.core.request import CompiledRequest
from services.core.ring import Chain
from services.core.selectors import EXISTS, IN, LabelSelector, Term
from services.core.state import ClusterView, NodeState

SELECTOR_REASON: Final = "didn't match the label selector"
SOFT_WEIGHT: Final = 100


def term_nodes(view: ClusterView, term: Term) -> Sequence[str] | None:
    """The nodes that can pass an `in` or `exists` term, from the label index (None when the term cannot narrow)."""
    if term.op == EXISTS:
        values = view.labels.by_key.get(term.key, {})
        return Chain([values[value].ids for value in sorted(values)])
    if term.op != IN:
        return None
    rings = [view.labels.nodes(term.key, value) for value in sorted(term.values)]
    found = [ring for ring in rings if ring is not None]
    if len(found) == 1:
        return found[0].ids
    return Chain([ring.ids for ring in found])


class SelectorFilter(Filter):
    """Every term of the selector must hold for the node's labels."""

    def __init__(
        self, view: ClusterView, selector: LabelSelector, reason: str = SELECTOR_REASON, rank: int = RANK_SELECTOR
    ) -> None:
        self.selector = selector
        self.reason = reason
        self.rank = rank
        narrowed = [nodes for nodes in (term_nodes(view, term) for term in selector.terms) if nodes is not None]
        self.candidates = min(narrowed, key=len) if narrowed else None
        self.unknown = unknown_keys(view, selector)

    def check(self, node: NodeState) -> str | None:
        return None if self.selector.matches(node.labels) else self.reason

    def hint(self) -> str:
        """`no node has a label key 'dsik' (did you mean 'disk'?)` for each key the selector needs and no node has."""
        return "; ".join(self.unknown)


def unknown_keys(view: ClusterView, selector: LabelSelector) -> list[str]:
    """For each key a positive term needs (`k=v`, `k=in(..)`, `k=exists()`) that no node has, nor any node type
    of the autoscaler: saying so, with the closest key some node or node type has."""
    found = []
    launchable: set[str] | None = None
    for term in selector.terms:
        if not term.positive or term.key in view.labels.by_key:
            continue
        if launchable is None:
            launchable = {key for labels in view.node_type_labels.values() for key in labels}
        if term.key in launchable:
            continue
        known = [*view.labels.by_key, *sorted(launchable.difference(view.labels.by_key))]
        close = difflib.get_close_matches(term.key, known, n=1, cutoff=0.6)
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        holders = "no node or node type of the autoscaler has" if view.node_type_labels else "no node has"
        found.append(f"{holders} a label key {term.key!r}{guess}")
    return found


class SoftLabels(Scorer):
    """100 for each soft entry the node's labels satisfy."""

    def __init__(self, view: ClusterView, selector: LabelSelector) -> None:
        self.terms = selector.terms
        self.preferred = Chain([nodes for nodes in (term_nodes(view, term) for term in self.terms) if nodes])
        self.exhaustive = not all(term.positive for term in self.terms)
        self.ceiling = SOFT_WEIGHT * len(self.terms)

    def weight(self, node: NodeState) -> int:
        labels = node.labels
        return SOFT_WEIGHT * sum(1 for term in self.terms if term.matches(labels))


def for_actor(view: ClusterView, work: CompiledRequest) -> Prepared:
    """The NodeLabel strategy: its hard selector filters, its soft one scores."""
    hard, soft = work.node_label_hard, work.node_label_soft
    rules: list[Filter | Scorer] = []
    if hard is not None:
        rules.append(SelectorFilter(view, hard, rank=RANK_NODE_LABELS))
    if soft is not None:
        rules.append(SoftLabels(view, soft))
    return rules


def for_option(view: ClusterView, selector: LabelSelector) -> Sequence[Filter]:
    """The option's `label_selector`, when it has terms."""
    return (SelectorFilter(view, selector),) if selector else ()


register(Rule(__name__, RANK_SELECTOR, actor=for_actor, option=for_option))
