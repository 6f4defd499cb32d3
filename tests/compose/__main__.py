"""`python -m tests.compose [FILE ...]`: run each compose file (default: deploy/compose.yaml, then
deploy/compose.cluster.yaml) on a Docker engine and check it as a user would; exit 0 when every check passed."""

from __future__ import annotations

import argparse
import re
import signal
import sys
import tempfile
from pathlib import Path
from types import FrameType

from tests.compose import images, scenarios
from tests.compose.checks import ROOT, User, client_url
from tests.compose.engine import Engine, NoEngineHereError, engine
from tests.compose.project import Project, replicas
from tests.compose.scenarios import Deployment
from tests.compose.shell import ComposeTestError, Steps, say

DEFAULT_FILES = (ROOT / "deploy" / "compose.yaml", ROOT / "deploy" / "compose.cluster.yaml")
PROJECT_PREFIX = "corral-compose-test"


def base_images(project: Project) -> set[str]:
    """The FROM images of the Dockerfiles the file's services build."""
    found = set()
    for spec in project.definitions().values():
        if build := spec.get("build"):
            dockerfile = (project.file.parent / build["context"] / build.get("dockerfile", "Dockerfile")).resolve()
            found |= set(re.findall(r"^FROM\s+(\S+)", dockerfile.read_text(), flags=re.MULTILINE))
    return found


def runnable(project: Project, available: set[str]) -> list[str]:
    """The file's services whose image is here (or built from one that is), without those at 0 replicas."""
    definitions = project.definitions()
    built = base_images(project) <= available
    chosen = [
        name
        for name, spec in definitions.items()
        if (spec["image"] in available if "image" in spec else built) and replicas(spec) > 0
    ]
    if left_out := sorted(set(definitions) - set(chosen)):
        say(f"not started (no image for them here, or 0 replicas): {', '.join(left_out)}")
    return chosen


def check(engine_: Engine, file: Path, steps: Steps) -> None:
    """Bring `file` up as a project of its own, check it, and take it down with its volumes, whatever happened."""
    project = Project(engine_, file, f"{PROJECT_PREFIX}-{file.stem.replace('.', '-')}")
    project.down()
    with steps.step(f"images for {file.name}"):
        available = images.prepare(engine_, set(project.images().values()) | base_images(project))
    services = runnable(project, available)
    nats_servers = [name for name in services if project.images().get(name, "").startswith("nats:")]
    corral_services = [name for name in services if "build" in project.definitions()[name] and name != "sim"]
    user = User(client_url(scenarios.published_ports(project, nats_servers)))
    deployment = Deployment(project, steps, services, corral_services, user)
    try:
        if len(nats_servers) > 1:
            with tempfile.TemporaryDirectory() as folder:
                scenarios.cluster(deployment, nats_servers, Path(folder) / "sim.log")
        else:
            scenarios.single_server(deployment)
    finally:
        with steps.step(f"down -v {project.name}"):
            project.down()


def stop_on_signal(number: int, frame: FrameType | None) -> None:
    """SIGTERM (make interrupted, CI cancelled) unwinds like Ctrl-C, so every project is taken down."""
    raise KeyboardInterrupt(f"signal {number}")


NOT_RUN = 77
"""The exit status when no Docker engine can run on this machine (`.ci/run` then says the test was skipped)."""


def main(argv: list[str] | None = None) -> int:
    """Check each file; print the steps with their times; 0 when all passed, `NOT_RUN` when no engine can run here,
    1 otherwise."""
    parser = argparse.ArgumentParser(prog="python -m tests.compose", description=__doc__)
    parser.add_argument("files", nargs="*", type=Path, default=list(DEFAULT_FILES), help="compose files to run")
    arguments = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, stop_on_signal)
    steps = Steps()
    running: Engine | None = None
    try:
        with steps.step("a Docker engine"):
            running = engine()
        for file in arguments.files:
            check(running, file.resolve(), steps)
    except NoEngineHereError as error:
        print(f"\nNOT RUN: {error}", file=sys.stderr, flush=True)
        return NOT_RUN
    except ComposeTestError as error:
        print(f"\nFAILED: {error}", file=sys.stderr, flush=True)
        return 1
    finally:
        if running is not None:
            running.stop()
        print(f"\nSteps:\n{steps.summary()}", flush=True)
    print("compose test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
