"""The Docker engine and the compose command a run uses.

An engine that already answers (at DOCKER_HOST, else the default socket) is used as it is. Otherwise, as root with
`dockerd` installed, the run starts a private one on its own socket and data root and stops it when it ends: on
the default socket it would turn every other test session on the machine to Docker-backed servers
(`tests/support/servers.py` asks the default engine).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.compose.shell import ComposeTestError, run, say, wait_for


class NoEngineHereError(ComposeTestError):
    """No Docker engine answers and none can be started on this machine (not root, no dockerd, or a sandbox where
    dockerd cannot run): the compose test cannot run here at all, which is not a failure of the deployment."""


PRIVATE_ROOT = Path("/run/corral-compose-test")
PRIVATE_DATA = Path("/var/lib/corral-compose-test/docker")
ENGINE_START_S = 60.0
INSTALL_HINT = "as root on Debian: apt-get install docker.io docker-compose debootstrap (`make docker` does)"


@dataclass
class Engine:
    """Where the engine listens (the environment every docker and compose command gets), and the compose command."""

    env: dict[str, str]
    compose: list[str]
    started: subprocess.Popen[bytes] | None = None
    log: Path | None = field(default=None)

    def docker(self, *args: str, timeout: float = 60.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`docker ARGS` against this engine."""
        return run(["docker", *args], timeout=timeout, env=self.env, check=check)

    def stop(self) -> None:
        """Stop the engine this run started (none otherwise); its images stay in its data root for the next run."""
        if self.started is None:
            return
        self.started.terminate()
        try:
            self.started.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.started.kill()
            self.started.wait(timeout=10)
        self.started = None


def answers(env: Mapping[str, str]) -> bool:
    """Whether `docker info` gets an answer from the engine `env` points at, within a few seconds."""
    if shutil.which("docker") is None:
        return False
    return run(["docker", "info", "--format", "{{.ServerVersion}}"], timeout=15, env=env, check=False).returncode == 0


def compose_command(env: Mapping[str, str]) -> list[str]:
    """`docker compose` (v2) when the CLI has it, else `docker-compose` (v1)."""
    if run(["docker", "compose", "version"], timeout=15, env=env, check=False).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise ComposeTestError(f"neither `docker compose` nor `docker-compose` is installed ({INSTALL_HINT})")


def start_private_engine() -> tuple[dict[str, str], subprocess.Popen[bytes], Path]:
    """Start `dockerd` on a socket, exec root and data root of its own; wait until it answers."""
    if shutil.which("dockerd") is None or os.geteuid() != 0:
        raise NoEngineHereError(f"no Docker engine answers and none can be started here ({INSTALL_HINT})")
    PRIVATE_ROOT.mkdir(parents=True, exist_ok=True)
    PRIVATE_DATA.mkdir(parents=True, exist_ok=True)
    socket = PRIVATE_ROOT / "docker.sock"
    log = PRIVATE_ROOT / "dockerd.log"
    command = [
        "dockerd",
        "--host",
        f"unix://{socket}",
        "--pidfile",
        str(PRIVATE_ROOT / "dockerd.pid"),
        "--exec-root",
        str(PRIVATE_ROOT / "exec"),
        "--data-root",
        str(PRIVATE_DATA),
    ]
    with log.open("ab") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    env = {**os.environ, "DOCKER_HOST": f"unix://{socket}"}

    def up() -> bool | None:
        if process.poll() is not None:
            raise NoEngineHereError(f"dockerd exited {process.returncode} (it cannot run on this machine?); see {log}")
        return True if answers(env) else None

    try:
        wait_for("a private Docker engine answering", up, ENGINE_START_S)
    except ComposeTestError as error:
        process.kill()
        raise NoEngineHereError(str(error)) from None
    return env, process, log


def engine() -> Engine:
    """The engine this run uses, and says which."""
    env = dict(os.environ)
    if answers(env):
        say(f"Docker engine at {env.get('DOCKER_HOST', 'the default socket')}")
        return Engine(env, compose_command(env))
    env, process, log = start_private_engine()
    say(f"started a private Docker engine at {env['DOCKER_HOST']} (log: {log}); it stops when the run ends")
    return Engine(env, compose_command(env), process, log)
