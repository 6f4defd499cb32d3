"""The test's `command` provider launch: start `corral node start` for the launch in the background (its pid in
$NODES_DIR/<launch id>.pid), from the facts the autoscaler puts in the environment."""

import json
import os
import subprocess
import sys
from pathlib import Path

folder = Path(os.environ["NODES_DIR"])
launch_id = os.environ["CORRAL_LAUNCH_ID"]
resources = ",".join(f"{name}={amount:g}" for name, amount in json.loads(os.environ["CORRAL_NODE_RESOURCES"]).items())
labels = ",".join(f"{key}={value}" for key, value in json.loads(os.environ["CORRAL_NODE_LABELS"]).items())
node_id = f"{os.environ['CORRAL_NODE_TYPE']}-{launch_id}"
command = [sys.executable, "-m", "services.cli", "node", "start", node_id, "--resources", resources]
if labels:
    command += ["--labels", labels]
with (folder / f"{launch_id}.log").open("ab") as log:
    agent = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
(folder / f"{launch_id}.pid").write_text(str(agent.pid))
