"""What a decision returns to callers: `Placed` or `Pending`, the same values in-process and on the bus."""

from __future__ import annotations

import msgspec

from schemas.events import Explanation


class Placed(msgspec.Struct, frozen=True, tag_field="type", tag="placed", forbid_unknown_fields=True):
    """The work is placed: an actor on `node_id`, a placement group's bundles on `bundle_nodes`."""

    id: str
    node_id: str | None = None
    bundle_nodes: list[str] = []
    bundle_index: int = -1


class Pending(msgspec.Struct, frozen=True, tag_field="type", tag="pending", forbid_unknown_fields=True):
    """The work waits: `message` in the `0/N nodes are available: ...` form, counts and nodes per reason."""

    id: str
    message: str
    reasons: dict[str, int]
    nodes_by_reason: dict[str, list[str]]
    group_reason: str = ""
    kind: str = "actor"

    @classmethod
    def of(cls, work_id: str, explanation: Explanation, kind: str = "actor") -> Pending:
        """Build from a recorded or fresh explanation."""
        return cls(
            work_id,
            explanation.message,
            dict(explanation.reasons),
            {reason: list(ids) for reason, ids in explanation.nodes_by_reason.items()},
            explanation.group_reason,
            kind,
        )


Decision = Placed | Pending
