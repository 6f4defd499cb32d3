"""What a rule prepared for one decision offers the pipeline: `check` (filter), `weight` (score), candidates (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from services.core.state import NodeState

# Rank orders the reasons in an explanation, as the pipeline meets them.
RANK_CAPACITY, RANK_TAINTS, RANK_SELECTOR, RANK_NODE_LABELS, RANK_NODE_AFFINITY = 0, 1, 2, 3, 4
RANK_ACTOR_AFFINITY, RANK_EXISTING_ANTI, RANK_DATAFLOW, RANK_BUNDLE = 5, 6, 7, 8
RANK_FREE: Final = 9


class Filter:
    """A hard rule: `check` returns None when the node may take the work, else the reason it may not."""

    rank = RANK_CAPACITY
    candidates: Sequence[str] | None = None
    """When set, only these nodes (in hash order) can pass: the pipeline walks the smallest such list."""
    new_nodes_fail = False
    """True when a node added now, hosting no work yet, could not pass (the rule needs work on the node itself,
    or work that is nowhere): growing a virtual cluster by new nodes cannot help."""
    checks_total = False
    """True when the rule checks the node's total resources, which a room lent from elsewhere replaces."""

    def check(self, node: NodeState) -> str | None:
        """None, or the rejection reason."""
        raise NotImplementedError

    def hint(self) -> str:
        """What an explanation adds when this rule rejects every node: a mistake it can see ("" for none)."""
        return ""


class Scorer:
    """A soft rule: `weight` adds to a node's soft weight; `preferred` lists the nodes it can add to."""

    preferred: Sequence[str] = ()
    exhaustive = False
    """True when the nodes this rule favours cannot be listed from an index (a negative soft term): then the walk
    goes on until it has a full sample of nodes of the highest weight (or has seen every node), so a preference is
    never lost to sampling."""
    ceiling = 0
    """The highest weight this rule can give a node."""

    def weight(self, node: NodeState) -> int:
        """The soft weight this rule gives the node."""
        raise NotImplementedError
