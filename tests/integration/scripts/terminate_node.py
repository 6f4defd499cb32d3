"""The test's `command` provider terminate: stop the agent the launch started (and note the node id it was told)."""

import os
import signal
from pathlib import Path

folder = Path(os.environ["NODES_DIR"])
launch_id = os.environ["CORRAL_LAUNCH_ID"]
pid = folder / f"{launch_id}.pid"
if pid.exists():
    os.kill(int(pid.read_text()), signal.SIGTERM)
(folder / f"{launch_id}.terminated").write_text(os.environ["CORRAL_NODE_ID"])
