"""The demo's third act, through the bus: an empty cluster and the autoscaler. A GPU actor with a toleration waits,
the autoscaler launches a gpu-a100 and the actor is placed there; an actor with an unknown label selector is
reported as infeasible for every node type; the idle GPU node is scaled down after a short idle timeout."""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from schemas import Exists, ScheduleRequest
from services.cli.commands.autoscaler import render
from services.client import SyncClient
from services.local.mesh import AUTOSCALER, SERVICES, start_mesh

NODE_TYPES = """
provider: {type: local}
idle_timeout_s: 2
launch_timeout_s: 30
node_types:
  cpu-4:
    resources: {CPU: 4}
    labels: {type: 4c8g, zone: usa-1}
    max_workers: 10
  gpu-a100:
    resources: {CPU: 16, GPU: 4}
    labels: {accelerator-type: A100}
    taints: {gpu_node: "true"}
    max_workers: 2
    cost: 10
"""
PATIENCE_S = 30.0


def wait_until(what: str, holds: Callable[[], bool]) -> None:
    """Poll `holds` every 50 ms until it is true; `TimeoutError` naming `what` after `PATIENCE_S`."""
    deadline = time.monotonic() + PATIENCE_S
    while not holds():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the demo waited {PATIENCE_S:g}s for {what}")
        time.sleep(0.05)


def act(client: SyncClient) -> None:
    """Scale up for a tolerated GPU actor, explain an infeasible one, scale the idle node down."""
    print("\n=== the autoscaler: node types cpu-4 and gpu-a100 (tainted gpu_node), an empty cluster ===")
    trainer = ScheduleRequest("trainer", {"GPU": 1}, tolerations={"gpu_node": Exists()})
    print(f"submit trainer (GPU 1, tolerates gpu_node): {type(client.submit(trainer)).__name__}")
    placed = client.wait_placed("trainer", timeout=PATIENCE_S)
    (launch,) = client.autoscaler_status().launches
    print(f"  the autoscaler asked for launch {launch.launch_id} ({launch.node_type}) for {', '.join(launch.work)}")
    print(f"  trainer placed on {placed.node_id}, the node that launch registered")
    odd = ScheduleRequest("odd", {"CPU": 1}, label_selector={"rack": "r9"})
    print(f"submit odd (selector rack=r9): {type(client.submit(odd)).__name__}")
    wait_until("the verdict on odd", lambda: "no node type" in client.autoscaler_why("odd").message)
    print(f"  {client.autoscaler_why('odd').message}")
    client.remove_actor("odd")
    client.remove_actor("trainer")
    print("trainer and odd removed: the GPU node is idle (idle_timeout_s 2)")
    wait_until("the scale-down", lambda: placed.node_id not in {node.node_id for node in client.nodes()})
    wait_until("the status to show it", lambda: bool(client.autoscaler_status().terminations))
    print(f"  {placed.node_id} tainted corral.io/scale-down=true:NoSchedule, terminated and removed\n")
    print(render(client.autoscaler_status()))


def run() -> int:
    """Start a mesh with the autoscaler, run the act, stop everything; 0 when done."""
    with tempfile.TemporaryDirectory(prefix="corral-demo-autoscaler-") as data:
        config = Path(data) / "autoscaler.yaml"
        config.write_text(NODE_TYPES)
        print("starting the embedded mesh with the autoscaler ...", file=sys.stderr)
        settings = {
            "CORRAL_AUTOSCALER_CONFIG": str(config),
            "CORRAL_AUTOSCALER_INTERVAL": "0.5",
            "CORRAL_RARE_RESOURCES": "GPU",
        }
        mesh = start_mesh(Path(data) / "mesh", services=(*SERVICES, AUTOSCALER), settings=settings)
        try:
            with SyncClient(mesh.nats_url, timeout=10.0) as client:
                client.wait_ready()
                client.wait_autoscaler()
                act(client)
        finally:
            mesh.stop()
        print("mesh stopped cleanly", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(run())
