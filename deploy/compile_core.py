"""Build the compiled core (`make compiled`): `services/core` compiled with mypyc into `build/compiled`.

Processes started with `CORRAL_CORE=compiled` run it in place of the core's sources (`services.compiled_core`).
It needs mypyc (installed with mypy, a dev dependency), a C compiler and Python's headers, and takes one to two
minutes of one core.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from services.compiled_core import BUILD, GROUP, ROOT, SETTING, SOURCES, STAMP, stamp, unusable

SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify
group, opt_level, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
sys.argv[1:] = ["build_ext", "--inplace"]
setup(name=group, ext_modules=mypycify(paths, opt_level=opt_level, group_name=group))
"""
"""The setuptools script mypyc builds through: one shared library for all the core's modules (calls between them
stay native), a small extension module per module that loads it."""


OPT_LEVEL = "opt-level"
"""The file of a build that says the optimisation level it was compiled at."""


class BuildError(Exception):
    """mypyc or the C compiler refused the core; the message ends with what they printed."""


def build(target: Path, opt_level: str, core: Path = SOURCES) -> None:
    """Compile the core (its sources in `core`) into `target`: replaced whole, once the new build is complete and
    stamped with the digest of the sources it was compiled from."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".compiling-") as scratch:
        work = Path(scratch)
        code = work / "code"
        sources = code / "services" / "core"
        shutil.copytree(core, sources, ignore=shutil.ignore_patterns("__pycache__"))
        (code / "services" / "__init__.py").write_text("")
        shutil.copytree(ROOT / "schemas", work / "types" / "schemas", ignore=shutil.ignore_patterns("__pycache__"))
        modules = sorted(path.relative_to(code).as_posix() for path in sources.rglob("*.py"))
        env = {**os.environ, "MYPYPATH": str(work / "types")}
        command = [sys.executable, "-c", SETUP, GROUP, opt_level, *modules]
        done = subprocess.run(
            command, check=False, cwd=code, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        if done.returncode:
            raise BuildError(f"mypyc failed (exit {done.returncode}):\n{done.stdout[-20_000:]}")
        built = work / "built"
        for extension in [*code.glob("*.so"), *(code / "services").rglob("*.so")]:
            (built / extension.relative_to(code)).parent.mkdir(parents=True, exist_ok=True)
            extension.rename(built / extension.relative_to(code))
        (built / OPT_LEVEL).write_text(opt_level)
        (built / STAMP).write_text(stamp(sources), encoding="utf-8")
        if target.exists():
            target.rename(work / "replaced")
        built.rename(target)


def _built_at(build: Path) -> str:
    """The optimisation level `build` was compiled at ("" when unknown)."""
    try:
        return (build / OPT_LEVEL).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="deploy/compile_core.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--opt-level", choices="0123", default="3", help="the C compiler's optimisation level")
    parser.add_argument(
        "--force", action="store_true", help="build even when up to date (built from these sources at this level)"
    )
    args = parser.parse_args(argv)
    if not args.force and unusable() is None and _built_at(BUILD) == args.opt_level:
        print(f"compiled core in {BUILD} is up to date with {SOURCES}")
        return 0
    try:
        build(BUILD, args.opt_level)
    except BuildError as error:
        print(f"compile_core: {error}", file=sys.stderr)
        return 1
    print(f"compiled core built in {BUILD}: processes started with {SETTING}=compiled run it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
