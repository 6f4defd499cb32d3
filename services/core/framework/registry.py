"""The rule registry: each plugin module registers its rule once, at import; decisions read it resolved (pure)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, TypeVarTuple

from services.core.framework.plugin import Filter, Scorer
from services.core.request import CompiledGroup, CompiledRequest
from services.core.selectors import LabelSelector
from services.core.state import ClusterView, Resources

Prepared = Sequence[Filter | Scorer]
"""What a rule prepares for one piece of work: its filters and scorers (none when it does not apply)."""
Args = TypeVarTuple("Args")


@dataclass(frozen=True, slots=True)
class Rule:
    """One placement rule: the module defining it, its place in the pipeline, and what it prepares per work.

    `order` sets the order rules are asked in (so the order of their scorers); filters then run by their rank.
    """

    module: str
    order: int
    actor: Callable[[ClusterView, CompiledRequest], Prepared] | None = None
    """For an actor or task, shared by all its options."""
    option: Callable[[ClusterView, LabelSelector], Sequence[Filter]] | None = None
    """For one option (the primary label selector or a fallback) of an actor or task."""
    bundle: Callable[[ClusterView, CompiledGroup, Resources, LabelSelector], Prepared] | None = None
    """For one bundle of a placement group (STRICT_PACK: all of them, summed): its need and label selector."""


_RULES: Final[list[Rule]] = []


def register(rule: Rule) -> None:
    """Add a rule (each plugin module calls this once, at import)."""
    _RULES.append(rule)


def registered() -> tuple[Rule, ...]:
    """Every registered rule, in pipeline order."""
    return tuple(sorted(_RULES, key=lambda rule: (rule.order, rule.module)))


def prepare(makers: Sequence[Callable[[*Args], Prepared]], *args: *Args) -> tuple[list[Filter], list[Scorer]]:
    """Ask each rule (in order) what it prepares for the work, as the filters and the scorers of a plan."""
    filters: list[Filter] = []
    scorers: list[Scorer] = []
    for make in makers:
        for rule in make(*args):
            if isinstance(rule, Filter):
                filters.append(rule)
            else:
                scorers.append(rule)
    return filters, scorers
