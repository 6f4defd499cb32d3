"""Resources a virtual cluster gives back wake the work waiting for them in its parent, command after command."""

from __future__ import annotations

import msgspec

from schemas import ScheduleRequest
from services.core import Cluster, Placed
from tests.core.builders import make_actor
from tests.core.vc_builders import spec


def in_vc(actor_id: str, cpu: float) -> ScheduleRequest:
    return msgspec.structs.replace(make_actor(actor_id, cpu), vcluster_id="vc")


def test_root_work_waiting_on_what_a_cluster_borrowed_is_placed_each_time_it_comes_back() -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4})
    cluster.create_virtual_cluster("vc", spec(max_cpu=4))
    for round_ in range(3):  # every round after the first comes after a command that re-tried freed resources
        assert isinstance(cluster.submit(in_vc(f"borrower{round_}", 4)), Placed)
        assert not isinstance(cluster.submit(make_actor(f"root{round_}", 4)), Placed)
        cluster.remove_actor(f"borrower{round_}")  # the flexible node shrinks: n0 is free again
        assert cluster.placements().get(f"root{round_}") == "n0", f"round {round_}"
        cluster.remove_actor(f"root{round_}")
