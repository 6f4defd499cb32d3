"""`deploy/compile_core.py` (`make compiled`) on a core of two small modules: what it builds runs in a fresh
interpreter and is stamped with its sources, and a core mypyc refuses leaves the build there was untouched."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services import compiled_core
from tests.support.examples import examples

NEEDS_CC = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to build with")


def builder() -> ModuleType:
    """`deploy/compile_core.py`, a script rather than a package module, loaded from its file."""
    spec = importlib.util.spec_from_file_location("compile_core", compiled_core.ROOT / "deploy" / "compile_core.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def small_core(folder: Path, body: str) -> Path:
    """A core package of two modules, `tally` holding `body`."""
    core = folder / "core"
    core.mkdir(parents=True, exist_ok=True)
    (core / "__init__.py").write_text('"""A small core."""\n')
    (core / "tally.py").write_text(body)
    return core


@NEEDS_CC
def test_a_core_compiles_into_extension_modules_stamped_with_its_sources(tmp_path: Path) -> None:
    core = small_core(tmp_path, "def double(x: int) -> int:\n    return 2 * x\n")
    target = tmp_path / "build"
    builder().build(target, "0", core)
    assert compiled_core.unusable(target, core) is None
    built = sorted(path.relative_to(target).as_posix() for path in target.rglob("*") if path.is_file())
    suffix = compiled_core.stamp(core).split()[1]
    assert f"services/core/tally{suffix}" in built and not [path for path in built if path.endswith(".py")]
    ran = subprocess.run(  # without the site (-S) nor this checkout on the path, `services` is the build's alone
        [
            sys.executable,
            "-S",
            "-c",
            "from services.core import tally; print(tally.double(21), tally.__file__)",
        ],
        cwd=tmp_path,
        env={"PYTHONPATH": str(target)},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert ran.stdout.split() == ["42", str(target / "services" / "core" / f"tally{suffix}")]


@NEEDS_CC
def test_a_core_mypyc_refuses_is_reported_and_the_build_there_was_stays(tmp_path: Path) -> None:
    compile_core = builder()
    core = small_core(tmp_path, "def double(x: int) -> int:\n    return 2 * x\n")
    target = tmp_path / "build"
    compile_core.build(target, "0", core)
    before = {path: path.read_bytes() for path in target.rglob("*") if path.is_file()}
    small_core(tmp_path, "def double(x: int) -> int:\n    return 'twice'\n")
    with pytest.raises(compile_core.BuildError, match=r"tally\.py:2: error: Incompatible return value type"):
        compile_core.build(target, "0", core)
    assert {path: path.read_bytes() for path in target.rglob("*") if path.is_file()} == before
    assert compiled_core.unusable(target, core) is not None  # the sources moved on: the old build is not used
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".compiling-")]


@settings(max_examples=examples(200), deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_in_a_builds_opt_level_file_only_make_it_rebuild(data: bytes) -> None:
    """The file that says a build's optimisation level, whatever it holds, is read without failing, and matches a
    level only when it says that level."""
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "opt-level").write_bytes(data)
        level = builder()._built_at(Path(folder))
    assert isinstance(level, str)
    assert (level == "3") == (data.decode("utf-8", "replace").strip() == "3")


def test_the_level_a_build_was_made_at_is_read_back(tmp_path: Path) -> None:
    (tmp_path / "opt-level").write_text("3")  # as `build` writes it
    assert builder()._built_at(tmp_path) == "3"
    assert builder()._built_at(tmp_path / "no build") == ""
