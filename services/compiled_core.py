"""The compiled core: `services.core` built with mypyc (`make compiled`), and which build a process runs.

`CORRAL_CORE=compiled` runs the build in `build/compiled` in place of the core's Python sources, the same code
compiled to C (about twice as fast in the core, x1.4 on the leader's whole path). It is used only while it was built
from the sources as they are now, by this Python: `unusable` says why not otherwise, and the settings refuse it then.
Everything else (`schemas`, the services, the runtime) stays Python.

`deploy/compile_core.py` builds it (`make compiled`: mypyc, a C compiler and Python's headers).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import sys
from collections.abc import Mapping
from pathlib import Path

SETTING = "CORRAL_CORE"
BUILDS = ("source", "compiled")
"""The values of `CORRAL_CORE`: the core's Python sources (the default), or the compiled build."""
ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "services" / "core"
BUILD = ROOT / "build" / "compiled"
"""Where `make compiled` puts the build: `services/core/...` as extension modules, their shared library beside."""
STAMP = "core-sources.sha256"
"""The build's stamp: the digest of the sources it was built from, and the extension suffix of the Python it was
built by."""
GROUP = "corral_core"
"""The name of the build's shared library (`corral_core__mypyc`), imported by each module of the build."""


@functools.cache
def sources_digest(sources: Path = SOURCES) -> str:
    """A digest of every Python file of the core: its path under `sources` and its bytes."""
    digest = hashlib.sha256()
    for path in sorted(sources.rglob("*.py")):
        digest.update(path.relative_to(sources).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def stamp(sources: Path = SOURCES) -> str:
    """What the build's stamp must read for this Python to run it in place of `sources`."""
    return f"{sources_digest(sources)} {importlib.machinery.EXTENSION_SUFFIXES[0]}\n"


def unusable(build: Path = BUILD, sources: Path = SOURCES) -> str | None:
    """Why the build in `build` cannot run in place of `sources` now (None when it can)."""
    try:
        built = (build / STAMP).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"no compiled core in {build}: build it with `make compiled`"
    if built != stamp(sources):
        return (
            f"the compiled core in {build} was built from other sources than {sources} holds now, or by another "
            "Python: build it again with `make compiled`"
        )
    return None


def requested(environ: Mapping[str, str]) -> str:
    """The build `CORRAL_CORE` asks for (unset or empty: the sources); any other value is the settings' to refuse."""
    return environ.get(SETTING) or "source"


def load(environ: Mapping[str, str], services_path: list[str], build: Path = BUILD, sources: Path = SOURCES) -> str:
    """Put the build ahead of the sources on `services_path` (the `services` package's path) when `environ` asks
    for it and it is usable; the build this process runs, "source" or "compiled"."""
    if requested(environ) != "compiled" or unusable(build, sources) is not None:
        return "source"
    services_path.insert(0, str(build / "services"))
    if str(build) not in sys.path:
        sys.path.append(str(build))  # the shared library, a top-level module
    return "compiled"
