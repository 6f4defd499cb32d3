"""A seeded workload on the core alone that prints one line: how many events it wrote and their digest, byte for byte.

`python -m tests.core.cross_build` must print the same line under either build of the core (`CORRAL_CORE`):
services of both builds fold one log, and a standby of one build takes over from a leader of the other.
The workload: the load test's nodes and request mix (selectors, tolerations, SPREAD, affinity and anti-affinity),
removals, virtual clusters (fixed and flexible, one queued), placement groups, label and taint edits, failures, and
node deaths.
"""

from __future__ import annotations

import hashlib
import random
import sys
from collections import deque
from collections.abc import Callable
from typing import Literal

import msgspec

from loadtest.nodes import node_shapes
from loadtest.workloads import Mix, Ticket
from schemas import PlacementGroupRequest, ScheduleRequest
from services.core import Cluster
from services.core.errors import RejectedError
from tests.core.vc_builders import fixed, spec

SEED = 11
GroupStrategy = Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"]


def workload(cluster: Cluster, steps: int, after_step: Callable[[], None] = lambda: None) -> None:
    """Drive `cluster` through `steps` seeded steps (`after_step` is called after each)."""
    rng = random.Random(SEED)
    for shape in node_shapes(60, "x"):
        cluster.add_node(shape.node_id, shape.resources, labels=shape.labels, taints=shape.taints, zone=shape.zone)
    cluster.create_virtual_cluster("fixed", spec(fixed(2, 2, 1)))
    cluster.create_virtual_cluster("flex", spec(min_cpu=1, max_cpu=6))
    cluster.create_virtual_cluster("big", spec(min_cpu=200))  # queued: more than the cluster holds
    mix, held, made = Mix(SEED), deque[str](), 0
    for step in range(steps):
        roll = rng.random()
        try:
            if roll < 0.55 or not held:
                made += 1
                request = mix.draw().build(Ticket(f"a{made}", "u", made))
                scope = rng.choice([None, None, None, "fixed", "flex"])
                cluster.submit(msgspec.structs.replace(request, vcluster_id=scope))
                held.append(request.actor_id)
            elif roll < 0.85:
                cluster.remove_actor(held.popleft())
            elif roll < 0.9:
                bundles = [{"CPU": 0.5}] * rng.randint(2, 4)
                strategy: GroupStrategy = rng.choice(["PACK", "SPREAD", "STRICT_SPREAD", "STRICT_PACK"])
                cluster.create_placement_group(PlacementGroupRequest(f"g{step}", bundles, strategy=strategy))
            elif roll < 0.93:
                cluster.fail_actor(held[rng.randrange(len(held))])
            elif roll < 0.96:
                node = f"x-n{rng.randrange(60):05d}"
                cluster.set_labels(node, {"disk": rng.choice(["ssd", "hdd"]), "step": str(step)})
            elif roll < 0.98:
                cluster.add_taints(f"x-n{rng.randrange(60):05d}", {"drain": str(step)})
            elif roll < 0.99:
                cluster.remove_node(f"x-n{rng.randrange(60):05d}")  # its work fails over, or waits
            else:
                cluster.add_node(f"y{step}", {"CPU": 8.0, "memory": 16.0}, labels={"disk": "ssd"}, zone="z9")
                cluster.submit(ScheduleRequest(f"late{step}", {"CPU": 1.0}, vcluster_id="flex"))
        except RejectedError:
            pass  # a refusal writes nothing: a node already gone, an actor not running
        after_step()


def main() -> int:
    cluster = Cluster(seed=SEED)
    workload(cluster, int(sys.argv[1]) if len(sys.argv) > 1 else 3_000)
    events = cluster.events()
    digest = hashlib.sha256(b"\n".join(msgspec.json.encode(event) for event in events)).hexdigest()
    print(f"{len(events)} events, sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
