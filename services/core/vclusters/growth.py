"""How a parent cluster grows so that a child's admission fits, piece by piece (pure).

A child's fixed-size nodes are indivisible: each goes whole on one node of the parent's scope, on its free room
first (node by node, never summed), else on a flexible node of the parent grown for it on one host, within the
parent's maximum and every ancestor's. STRICT_SPREAD keeps a group's nodes on distinct nodes of the parent. The
flexible minimum may be carved from several nodes (as admission does), so it takes free room and growth wherever
they are. All or nothing: a piece that fits nowhere leaves the parent as it is, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from services.core.amounts import format_amount
from services.core.plugins.taints import TaintFilter
from services.core.state import ClusterView, Resources, fits
from services.core.state.nominations import unheld
from services.core.state.tree import fixed_id, flexible_id, positive
from services.core.state.view import VClusterState, parent_scope
from services.core.vclusters.admission import missing_minimum
from services.core.vclusters.borrowing import Lender
from services.core.vclusters.spec import CompiledSpec


@dataclass(frozen=True)
class Growth:
    """How the parent grows for a child, and where the child's fixed-size nodes then go."""

    hosts: list[tuple[str, Resources]]
    """Per host (a node of the parent's parent scope): how much the parent's flexible node there grows."""
    slots: dict[int, str]
    """Per missing fixed-size slot of the child: the parent's node planned for it."""


NO_GROWTH: Final = Growth([], {})


class _Ledger:
    """What one attempt plans: per node (scope id, node id) the room it gains and the room taken from it, and per
    cluster how much its flexible nodes grow in total."""

    def __init__(self, lender: Lender) -> None:
        self.lender = lender
        self.gained: dict[tuple[str, str], Resources] = {}
        self.taken: dict[tuple[str, str], Resources] = {}
        self.grown: dict[str, Resources] = {}

    def free(self, scope: ClusterView, node_id: str) -> Resources:
        """A node's free room once the planned growth and takings are counted (a planned node starts empty; a root
        node's room held for nominated work is not free)."""
        node = scope.nodes.get(node_id)
        key = (scope.scope_id, node_id)
        room = dict(unheld(scope, node)) if node is not None else {}
        _add(room, self.gained.get(key, {}))
        _add(room, self.taken.get(key, {}), -1)
        return room

    def take(self, scope: ClusterView, node_id: str, amount: Resources) -> None:
        _add(self.taken.setdefault((scope.scope_id, node_id), {}), amount)

    def growable(self, vc: VClusterState, host_id: str, names: Resources) -> Resources:
        """Per resource in `names`: how much `vc`'s flexible node on `host_id` may still grow (the host's room,
        what the host may grow in turn, within `vc`'s headroom, less the quota its nominated actors hold)."""
        room = self.free(parent_scope(self.lender.root, vc), host_id)
        above = self._above(vc, host_id)
        if above is not None:
            _add(room, self.growable(*above, names))
        held = dict(self.lender.taken(vc))
        _add(held, self.grown.get(vc.vc_id, {}))
        spec = self.lender.specs(vc.vc_id)
        return {name: min(max(room.get(name, 0.0), 0.0), spec.headroom(name, held.get(name, 0.0))) for name in names}

    def grow(self, vc: VClusterState, host_id: str, amount: Resources) -> None:
        """Plan `vc`'s flexible node on `host_id` growing by `amount` (which `growable` allows), the host first."""
        upper = parent_scope(self.lender.root, vc)
        short = positive({name: need - self.free(upper, host_id).get(name, 0.0) for name, need in amount.items()})
        above = self._above(vc, host_id)
        if short and above is not None:
            self.grow(*above, short)
        self.take(upper, host_id, amount)
        _add(self.gained.setdefault((vc.vc_id, flexible_id(vc.vc_id, host_id)), {}), amount)
        _add(self.grown.setdefault(vc.vc_id, {}), amount)

    def _above(self, vc: VClusterState, host_id: str) -> tuple[VClusterState, str] | None:
        """The parent cluster and its host when `host_id` is a flexible node of `vc`'s parent (it may grow too)."""
        parent = self.lender.root.tree.clusters.get(vc.parent) if vc.parent else None
        vnode = parent.vnodes.get(host_id) if parent is not None else None
        if parent is None or vnode is None or not vnode.flexible:
            return None
        return parent, vnode.parent_node


class _Planner:
    """Places a child's pieces on its parent's nodes, growing the parent where a piece finds no room."""

    def __init__(self, lender: Lender, parent: VClusterState, spec: CompiledSpec) -> None:
        self.ledger = _Ledger(lender)
        self.parent = parent
        self.upper = parent_scope(lender.root, parent)
        self.tolerated = TaintFilter(spec.tolerations)
        allowed = TaintFilter(lender.specs(parent.vc_id).tolerations)
        hosts = sorted({vnode.parent_node for vnode in parent.vnodes.values() if vnode.flexible})
        hosts += [n for n in self.upper.ring.ids if flexible_id(parent.vc_id, n) not in parent.vnodes]
        self.hosts = [
            host_id
            for host_id in hosts
            if (host := self.upper.nodes.get(host_id)) is not None
            and allowed.check(host) is None
            and self.tolerated.check(host) is None
        ]
        """Where the parent may grow, in the order it tries: hosts it grew onto already, then ring order."""
        self.growth: dict[str, Resources] = {}

    def usable(self) -> list[str]:
        """The parent's nodes the child may be carved from, in ring order."""
        scope = self.parent.scope
        return [n for n in scope.ring.ids if n in scope.nodes and self.tolerated.check(scope.nodes[n]) is None]

    def put(self, piece: Resources, avoid: set[str], prefer: list[str]) -> str | None:
        """Put an indivisible piece whole on one node of the parent not in `avoid` (`prefer`red nodes first): free
        room, else a flexible node grown for it; the node's id (None: none can hold it)."""
        scope, ledger = self.parent.scope, self.ledger
        for node_id in _first(self.usable(), prefer):
            if node_id not in avoid and fits(ledger.free(scope, node_id), piece):
                ledger.take(scope, node_id, piece)
                return node_id
        flexible = [host for node_id in prefer if (host := self.host_of(node_id))]
        for host_id in _first(self.hosts, flexible):
            target = flexible_id(self.parent.vc_id, host_id)
            if target in avoid:
                continue
            room = ledger.free(scope, target)
            extra = positive({name: need - room.get(name, 0.0) for name, need in piece.items()})
            if fits(ledger.growable(self.parent, host_id, extra), extra):
                self._grow(host_id, extra)
                ledger.take(scope, target, piece)
                return target
        return None

    def carve(self, need: Resources, avoid: set[str]) -> Resources:
        """Take a divisible `need` from free room, then from growth, on nodes not in `avoid`; what is left."""
        scope, ledger = self.parent.scope, self.ledger
        for node_id in self.usable():
            if node_id not in avoid:
                share = _share(ledger.free(scope, node_id), need)
                ledger.take(scope, node_id, share)
                need = positive({name: amount - share.get(name, 0.0) for name, amount in need.items()})
        for host_id in self.hosts:
            target = flexible_id(self.parent.vc_id, host_id)
            if not need or target in avoid:
                continue
            share = _share(ledger.growable(self.parent, host_id, need), need)
            if share:
                self._grow(host_id, share)
                ledger.take(scope, target, share)
                need = positive({name: amount - share.get(name, 0.0) for name, amount in need.items()})
        return need

    def host_of(self, node_id: str) -> str:
        """The host of a flexible node of the parent, "" for any other node."""
        vnode = self.parent.vnodes.get(node_id)
        if vnode is not None:
            return vnode.parent_node if vnode.flexible else ""
        return next((host for host in self.growth if flexible_id(self.parent.vc_id, host) == node_id), "")

    def _grow(self, host_id: str, amount: Resources) -> None:
        self.ledger.grow(self.parent, host_id, amount)
        _add(self.growth.setdefault(host_id, {}), amount)


def parent_growth(lender: Lender, vc: VClusterState, spec: CompiledSpec) -> Growth | str:
    """How the parent cluster must grow to hold what `vc`'s admission still needs, each fixed-size node whole on
    one node (PACK keeps a group's nodes together where it can, STRICT_SPREAD apart); or why it cannot (then it
    does not grow at all).

    `NO_GROWTH` when the parent already has room (or is the root, queued, or never grows).
    """
    parent = lender.root.tree.clusters.get(vc.parent)
    if parent is None or parent.status == "queued" or not lender.specs(parent.vc_id).grows:
        return NO_GROWTH
    planner = _Planner(lender, parent, spec)
    slots: dict[int, str] = {}
    where = f"virtual cluster {parent.vc_id}"
    for index, (first_slot, group) in enumerate(spec.groups):
        distinct, pack = group.strategy == "STRICT_SPREAD", group.strategy == "PACK"
        ids = {slot: fixed_id(vc.vc_id, slot) for slot in range(first_slot, first_slot + len(group.request.bundles))}
        kept = sorted({vc.vnodes[i].parent_node for i in ids.values() if i in vc.vnodes})
        used = set(kept) if distinct else set()
        together = kept if pack else []
        missing = [slot for slot, vnode_id in ids.items() if vnode_id not in vc.vnodes]
        for slot in sorted(missing, key=lambda slot: -sum(spec.fixed[slot].resources.values())):  # hardest first
            piece = spec.fixed[slot].resources
            node_id = planner.put(piece, used, together)
            if node_id is None:
                apart = " apart from the group's other nodes (STRICT_SPREAD)" if distinct else ""
                return (
                    f"fixed_size_nodes[{index}].nodes[{slot - first_slot}] ({_amounts(piece)}) fits whole on no "
                    f"node of {where}{apart}, free or grown on one node within its maximum and its ancestors'"
                )
            slots[slot] = node_id
            if distinct:
                used.add(node_id)
            elif pack and node_id not in together:
                together.append(node_id)
    holding = {vnode.parent_node for vnode in vc.vnodes.values() if vnode.flexible}
    short = planner.carve(missing_minimum(vc, spec), holding)
    if short:
        return f"the flexible minimum is {_amounts(short)} more than {where} has free or may grow on nodes it may use"
    return Growth(list(planner.growth.items()), slots) if planner.growth else NO_GROWTH


def _first(ids: list[str], prefer: list[str]) -> list[str]:
    """`ids` with those in `prefer` first (in `prefer`'s order)."""
    return [*(i for i in prefer if i in ids), *(i for i in ids if i not in prefer)]


def _share(room: Resources, need: Resources) -> Resources:
    return positive({name: min(max(room.get(name, 0.0), 0.0), amount) for name, amount in need.items()})


def _add(into: Resources, amount: Resources, sign: float = 1.0) -> None:
    for name, quantity in amount.items():
        into[name] = into.get(name, 0.0) + sign * quantity


def _amounts(resources: Resources) -> str:
    return ", ".join(f"{name} {format_amount(name, amount)}" for name, amount in sorted(resources.items()))
