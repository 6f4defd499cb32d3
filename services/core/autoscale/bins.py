"""Where a round puts demand: free room on existing nodes, and bins (launching or newly planned nodes) (pure)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import Final

from services.core.autoscale.config import NodeType, ScalingConfig
from services.core.autoscale.nodes import imagined_node
from services.core.autoscale.plan_types import Fleet
from services.core.state import ClusterView, NodeState, Resources, fits, take
from services.core.state.model import EPSILON
from services.core.state.nominations import nominated_nodes

TEMPLATE_PREFIX: Final = "new-"
"""The id of the imagined node a type is judged on: `new-<type>` (it hosts nothing, so no actor is near it)."""


def copies_in(room: Resources, need: Resources, most: int) -> int:
    """How many copies of `need` fit in `room`, at most `most`."""
    count = most
    for name, amount in need.items():
        if amount > EPSILON:
            count = min(count, math.floor((room.get(name, 0.0) + EPSILON) / amount))
    return max(count, 0)


class FreeRoom:
    """What is free on the nodes of one scope, less what this round already counted there, and, at the root, less
    the room registered nodes hold for nominated work of the priority being served or higher (`at`: the round
    serves higher priority first, so held room of lower-priority work is free to it, as the scheduler lets it take
    that room; the work it then displaces is demand), until that work's own turn (`give_held`).

    Nodes are bucketed by what they have free (a node moves to another bucket when the round takes from it), so a
    shape is checked once per distinct free vector, not once per node.
    """

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.buckets: dict[tuple[tuple[str, float], ...], dict[str, NodeState]] = {}
        self.free: dict[tuple[tuple[str, float], ...], Resources] = {}
        self.rooms: dict[str, Resources] = {}
        for node in view.nodes.values():
            self._file(node, node.free)
        held = view.held if not view.scope_id else {}
        self.unheld: dict[tuple[str, str], tuple[int, Resources]] = {
            (node_id, work_id): hold
            for node_id, holds in held.items()
            if node_id in view.nodes
            for work_id, hold in holds.items()
        }
        """(node id, work id) -> (priority, room) of the holds not subtracted yet (of work below the priority served
        so far)."""
        self.holds_on: dict[str, list[str]] = {}
        """Node id -> the work ids it holds room for."""
        for node_id, work_id in self.unheld:
            self.holds_on.setdefault(node_id, []).append(work_id)
        self.holding: dict[tuple[str, str], Resources] = {}
        """The holds subtracted and not given back yet."""
        self.queue = sorted(self.unheld, key=lambda key: self.unheld[key][0])
        """The holds not subtracted yet, the highest priority last (`at` takes them from the end)."""

    def at(self, priority: int | None) -> None:
        """Serve work of `priority` next (never higher than before): subtract the room held for nominated work of
        that priority or higher; `None` (a virtual cluster's admission, which no held room is free to): all of it."""
        while self.queue:
            hold = self.unheld.get(self.queue[-1])
            if hold is not None and priority is not None and hold[0] < priority:
                return
            key = self.queue.pop()
            if hold is not None:
                del self.unheld[key]
                self.take(self.view.nodes[key[0]], hold[1])
                self.holding[key] = hold[1]

    def give_held(self, work_ids: list[str], priority: int | None) -> list[str]:
        """Serve work of `priority` (`at`) and give back the room registered nodes hold for these (nominated) work
        ids, theirs to count on; the ids, those with such room first (identical work: the held room counts for as
        many of them, and they are the ones its node takes)."""
        if not self.queue and not self.holding:
            return list(work_ids)
        self.at(priority)
        view = self.view
        holding = []
        for work_id in work_ids:
            for node_id in nominated_nodes(view, work_id):
                key = (node_id, work_id)
                held = self.holding.pop(key, None)
                if held is not None:
                    self.take(view.nodes[node_id], held, -1)
                if held is not None or self.unheld.pop(key, None) is not None:
                    holding.append(work_id)
        first = set(holding)
        return [*dict.fromkeys(holding), *(work_id for work_id in work_ids if work_id not in first)]

    def _file(self, node: NodeState, free: Resources) -> None:
        signature = tuple(sorted((name, amount) for name, amount in free.items() if amount > EPSILON))
        bucket = self.buckets.get(signature)
        if bucket is None:
            bucket = self.buckets[signature] = {}
            self.free[signature] = dict(signature)
        bucket[node.node_id] = node

    def room(self, node: NodeState) -> Resources:
        """What `node` still has free in this round."""
        return self.rooms.get(node.node_id, node.free)

    def nominated(self, need: Resources, work_id: str) -> Iterator[NodeState]:
        """The nodes nominated for `work_id` where `need` fits in room held for no other work (the scheduler chooses
        them outright)."""
        for node_id in nominated_nodes(self.view, work_id) if self.holds_on else ():
            node = self.view.nodes[node_id]
            if fits(self._wholly_unheld(node), need):
                yield node

    def candidates(self, need: Resources, work_id: str = "") -> Iterator[NodeState]:
        """The nodes where `need` fits now; first those nominated for `work_id` (`nominated`), then every node where
        it fits (a node taken from while iterating is offered with its new room)."""
        if work_id:
            yield from self.nominated(need, work_id)
        for signature, free in list(self.free.items()):
            if fits(free, need):
                yield from list(self.buckets[signature].values())

    def _wholly_unheld(self, node: NodeState) -> Resources:
        """What `node` still has free less the room it holds for other work of any priority: what the scheduler
        chooses a nominated node outright for."""
        left = dict(self.room(node))
        for work_id in self.holds_on.get(node.node_id, ()):
            hold = self.unheld.get((node.node_id, work_id))
            if hold is not None:
                take(left, hold[1])
        return left

    def take(self, node: NodeState, amount: Resources, copies: int = 1) -> None:
        """Count `copies` of `amount` as used on `node` (negative `copies` give them back)."""
        before = self.room(node)
        after = dict(before)
        for name, quantity in amount.items():
            after[name] = after.get(name, 0.0) - quantity * copies
        signature = tuple(sorted((name, value) for name, value in before.items() if value > EPSILON))
        self.buckets[signature].pop(node.node_id, None)
        self.rooms[node.node_id] = after
        self._file(node, after)


class FreeRooms:
    """One `FreeRoom` per scope (the root's, each virtual cluster's), built when first asked for."""

    def __init__(self) -> None:
        self._rooms: dict[str, FreeRoom] = {}

    def of(self, view: ClusterView) -> FreeRoom:
        """The free room of `view`'s scope."""
        room = self._rooms.get(view.scope_id)
        if room is None:
            room = self._rooms[view.scope_id] = FreeRoom(view)
        return room


Signature = tuple[tuple[str, float], ...]


def signature(free: Resources) -> Signature:
    """A free vector as a key (what is above zero, sorted)."""
    return tuple(sorted((name, amount) for name, amount in free.items() if amount > EPSILON))


class Bin:
    """A node the plan can put demand on: launching (asked for earlier) or planned in this round."""

    __slots__ = ("for_minimum", "launch_id", "loads", "node", "planned", "room", "shelf", "type_name")

    def __init__(
        self,
        type_name: str,
        node: NodeState,
        *,
        planned: bool,
        for_minimum: bool = False,
        launch_id: str = "",
        room: Resources | None = None,
    ) -> None:
        self.type_name = type_name
        """The node type ("" for an existing node's stand-in in the replay)."""
        self.room = node.total if room is None else room
        """What is free with nothing put here: the node's total, or on an existing node's stand-in the room that
        placement groups mixing it with new nodes took there."""
        self.launch_id = launch_id
        """For a node launched in an earlier round: its launch id."""
        self.node = node
        self.planned = planned
        self.for_minimum = for_minimum
        self.loads: list[tuple[str, Resources]] = []
        """(work id, amount) for each piece of work put here."""
        self.shelf: Shelf | None = None

    @property
    def work_ids(self) -> list[str]:
        """The work put here, each id once."""
        return list(dict.fromkeys(work_id for work_id, _ in self.loads))

    def load(self, work_id: str, amount: Resources) -> None:
        """Put `amount` of `work_id` here."""
        self._change(lambda: self.node.take(amount))
        self.loads.append((work_id, amount))

    def unload(self, work_id: str, amount: Resources) -> None:
        """Take back the last `load(work_id, amount)`."""
        self._change(lambda: self.node.give(amount))
        self.loads.reverse()
        self.loads.remove((work_id, amount))
        self.loads.reverse()

    def put(self, need: Resources, work_ids: list[str]) -> None:
        """Put one `need` per work id here."""
        total = {name: amount * len(work_ids) for name, amount in need.items()}
        self._change(lambda: self.node.take(total))
        self.loads += [(work_id, need) for work_id in work_ids]

    @property
    def existing(self) -> bool:
        """Whether this is an existing node's stand-in (not a node to launch)."""
        return not self.type_name

    def empty(self) -> None:
        """Take everything off."""
        self._change(self._refill)
        self.loads = []

    def _refill(self) -> None:
        self.node.free.clear()  # in place: what holds this dict sees the refill
        self.node.free.update(self.room)
        self.node.note_resources()

    def _change(self, change: Callable[[], None]) -> None:
        shelf = self.shelf
        if shelf is None:
            change()
            return
        shelf.remove(self)
        change()
        shelf.add(self)


class Shelf:
    """The bins of each type, bucketed by what they have free: first fit checks a bucket once, not each bin."""

    def __init__(self, names: Iterable[str]) -> None:
        self.rooms: dict[str, dict[Signature, dict[str, Bin]]] = {name: {} for name in names}
        self.free: dict[Signature, Resources] = {}

    def add(self, target: Bin) -> None:
        """File `target` under its free vector (it stays filed: a change to it moves it)."""
        key = signature(target.node.free)
        if key not in self.free:
            self.free[key] = dict(key)
        self.rooms[target.type_name].setdefault(key, {})[target.node.node_id] = target
        target.shelf = self

    def remove(self, target: Bin) -> None:
        """Unfile `target`."""
        buckets = self.rooms[target.type_name]
        key = signature(target.node.free)
        bucket = buckets.get(key)
        if bucket is not None:
            bucket.pop(target.node.node_id, None)
            if not bucket:
                del buckets[key]
        target.shelf = None

    def fitting(self, names: Iterable[str], need: Resources) -> Iterator[Bin]:
        """The bins of these types (in this order) where `need` fits now."""
        for name in names:
            for key, bucket in list(self.rooms[name].items()):
                if fits(self.free[key], need):
                    yield from list(bucket.values())


class Bins:
    """The launching and planned nodes of one round, per type, and what each type may still launch."""

    def __init__(
        self, config: ScalingConfig, fleet: Fleet, rare_resources: tuple[str, ...], budget: int, seed: int = 0
    ) -> None:
        self.config = config
        self.fleet = fleet
        self.rare_resources = rare_resources
        self.budget = budget
        self.seed = seed
        self.templates = {
            name: imagined_node(node_type, f"{TEMPLATE_PREFIX}{name}", rare_resources, seed)
            for name, node_type in config.node_types.items()
        }
        self.open: dict[str, list[Bin]] = {name: [] for name in config.node_types}
        self.shelf = Shelf(config.node_types)
        self.shelving = True
        for name in config.node_types:
            for launch_id in sorted(fleet.launching.get(name, ())):
                node = self._node(name, f"launch-{launch_id}")
                self._open(Bin(name, node, planned=False, launch_id=launch_id))
        self._planned: dict[str, int] = dict.fromkeys(config.node_types, 0)

    def _node(self, name: str, node_id: str) -> NodeState:
        return imagined_node(self.config.node_types[name], node_id, self.rare_resources, self.seed)

    def planned_count(self, name: str) -> int:
        """How many nodes of `name` this round plans to launch."""
        return self._planned.get(name, 0)

    def planned_by_type(self) -> dict[str, list[Bin]]:
        """Type -> the bins this round launches (types without any left out)."""
        found = {name: [b for b in bins if b.planned] for name, bins in self.open.items()}
        return {name: bins for name, bins in found.items() if bins}

    def room_left(self, name: str) -> int:
        """How many more nodes of `name` this round may launch (0 while it is backed off)."""
        node_type = self.config.node_types[name]
        if name in self.fleet.backed_off:
            return 0
        held = self.fleet.running_count(name) + self.fleet.launching_count(name) + self._planned[name]
        return max(0, min(node_type.max_workers - held, self.budget))

    def why_full(self, name: str) -> str:
        """Why no node of `name` can be launched now (for the demand's explanation)."""
        node_type = self.config.node_types[name]
        if name in self.fleet.backed_off:
            return f"{name} is backed off after a failed launch"
        if self.budget <= 0:
            return f"this round's upscaling budget is spent ({self.budget_given} nodes)"
        return f"{name} is at max_workers ({node_type.max_workers})"

    @property
    def budget_given(self) -> int:
        """The round's whole budget (what `budget` started at)."""
        return self.budget + sum(self._planned.values())

    def launch(self, name: str, *, for_minimum: bool = False) -> Bin:
        """Plan one more node of `name` (the caller checked `room_left`)."""
        self._planned[name] += 1
        self.budget -= 1
        node = self._node(name, f"planned-{name}-{self._planned[name]}")
        return self._open(Bin(name, node, planned=True, for_minimum=for_minimum))

    def _open(self, added: Bin) -> Bin:
        self.open[added.type_name].append(added)
        if self.shelving:
            self.shelf.add(added)
        return added

    def stop_shelving(self) -> None:
        """Packing is over: stop keeping the bins bucketed (what is put on them later moves no bucket)."""
        self.shelving = False
        for targets in self.open.values():
            for target in targets:
                if target.shelf is not None:
                    target.shelf.remove(target)

    def fitting(self, names: Iterable[str], need: Resources) -> Iterator[Bin]:
        """Launching and planned bins of these types (in this order) where `need` fits now."""
        return self.shelf.fitting(names, need)

    def undo(self, added: Bin) -> None:
        """Take back the launch of `added`, the last bin of its type (a gang that could not be placed whole)."""
        assert self.open[added.type_name][-1] is added, "only the newest launch of a type is taken back"
        self.open[added.type_name].pop()
        if added.shelf is not None:
            added.shelf.remove(added)
        self._planned[added.type_name] -= 1
        self.budget += 1

    def drop(self, unused: Bin) -> None:
        """Do not launch `unused` after all (a planned node the scheduler would leave empty)."""
        self.open[unused.type_name].remove(unused)
        if unused.shelf is not None:
            unused.shelf.remove(unused)
        self._planned[unused.type_name] -= 1
        self.budget += 1

    def reopen(self, dropped: Bin, place: int) -> None:
        """Launch `dropped` again, at the place it had among its type's bins (the replay meets them in order)."""
        self.open[dropped.type_name].insert(place, dropped)
        self._planned[dropped.type_name] += 1
        self.budget -= 1

    def keep_minimum(self) -> None:
        """Plan the nodes each type lacks to reach its `min_workers` (within its max and the budget)."""
        for name, node_type in self.config.node_types.items():
            missing = node_type.min_workers - self.fleet.running_count(name) - self.fleet.launching_count(name)
            for _ in range(max(0, missing)):
                if self.room_left(name) <= 0:
                    break
                self.launch(name, for_minimum=True)

    def cheapest(self, names: tuple[str, ...], need: Resources, count: int) -> str | None:
        """Of the types that may still launch, the one serving `count` copies of `need` for the least cost."""
        best: tuple[float, float, str] | None = None
        for name in names:
            if self.room_left(name) <= 0:
                continue
            node_type: NodeType = self.config.node_types[name]
            per_node = max(1, copies_in(node_type.resources, need, count))
            key = (math.ceil(count / per_node) * node_type.cost, node_type.cost, name)
            if best is None or key < best:
                best = key
        return best[2] if best is not None else None

    def cost(self, name: str) -> float:
        """The configured cost of one node of `name`."""
        return self.config.node_types[name].cost
