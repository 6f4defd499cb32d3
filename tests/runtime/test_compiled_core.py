"""The compiled core's guard: a build runs in place of the sources only while it was built from them, by this Python;
any stamp file, however hostile, only makes it unusable, and a service asked for a core it cannot run exits 2 saying
so in one line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services import CORE_BUILD, compiled_core
from services.local import preloaded
from tests.support.examples import examples


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    """A small tree of core sources."""
    root = tmp_path / "core"
    (root / "state").mkdir(parents=True)
    (root / "__init__.py").write_text('"""core"""\n')
    (root / "state" / "view.py").write_text("X = 1\n")
    return root


def stamped(tmp_path: Path, sources: Path) -> Path:
    """A build directory stamped as built from `sources` by this Python."""
    build = tmp_path / "build"
    (build / "services").mkdir(parents=True)
    (build / compiled_core.STAMP).write_text(compiled_core.stamp(sources))
    return build


def test_a_build_stamped_from_the_sources_as_they_are_is_usable_and_put_first(
    tmp_path: Path, sources: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    build = stamped(tmp_path, sources)
    assert compiled_core.unusable(build, sources) is None
    path = ["/repo/services"]
    assert compiled_core.load({"CORRAL_CORE": "compiled"}, path, build, sources) == "compiled"
    assert path == [str(build / "services"), "/repo/services"]
    assert sys.path[-1] == str(build)  # its shared library, after everything else


def test_without_the_setting_the_sources_run_whatever_is_built(tmp_path: Path, sources: Path) -> None:
    build = stamped(tmp_path, sources)
    for environ in ({}, {"CORRAL_CORE": ""}, {"CORRAL_CORE": "source"}, {"CORRAL_CORE": "Compiled"}):
        path = ["/repo/services"]
        assert compiled_core.load(environ, path, build, sources) == "source"
        assert path == ["/repo/services"]


@pytest.mark.parametrize(
    "change",
    [
        lambda root: (root / "state" / "view.py").write_text("X = 2\n"),  # an edit
        lambda root: (root / "state" / "new.py").write_text(""),  # a module added
        lambda root: (root / "state" / "view.py").rename(root / "state" / "views.py"),  # a module renamed
        lambda root: (root / "state" / "view.py").unlink(),  # a module removed
    ],
    ids=["edited", "added", "renamed", "removed"],
)
def test_a_build_older_than_its_sources_is_refused_and_the_sources_run(
    tmp_path: Path, sources: Path, change: Callable[[Path], object]
) -> None:
    build = stamped(tmp_path, sources)
    copy = tmp_path / "now"
    shutil.copytree(sources, copy)
    change(copy)
    reason = compiled_core.unusable(build, copy)
    assert reason is not None and "built from other sources" in reason and "make compiled" in reason
    path: list[str] = []
    assert compiled_core.load({"CORRAL_CORE": "compiled"}, path, build, copy) == "source"
    assert path == []


def test_no_build_at_all_says_how_to_make_one(tmp_path: Path, sources: Path) -> None:
    reason = compiled_core.unusable(tmp_path / "nothing", sources)
    assert reason is not None and "no compiled core" in reason and "make compiled" in reason


@settings(max_examples=examples(200), deadline=None)
@given(st.binary(max_size=300))
def test_any_stamp_file_but_the_right_one_makes_the_build_unusable_and_nothing_else(data: bytes) -> None:
    root = Path(tempfile.mkdtemp(prefix="corral-stamp-"))
    sources = root / "core"
    sources.mkdir()
    (sources / "__init__.py").write_text("")
    (root / compiled_core.STAMP).write_bytes(data)
    right = compiled_core.stamp(sources).encode()
    try:
        reason = compiled_core.unusable(root, sources)
    finally:
        shutil.rmtree(root)
    assert (reason is None) == (data == right)


def test_a_service_asked_for_a_core_it_cannot_run_exits_2_naming_the_setting(tmp_path: Path) -> None:
    """The other build than this suite runs: the compiled one refused (not built, or stale) by the settings, or the
    one a forked service cannot switch to, since it keeps what its preloaded parent imported."""
    other = "source" if CORE_BUILD == "compiled" else "compiled"
    log = tmp_path / "labels.log"
    code = preloaded.start("labels", {**os.environ, "CORRAL_CORE": other}, log).wait(timeout=60)
    lines = log.read_text().strip().splitlines()
    assert code == 2, log.read_text()[-2000:]
    assert len(lines) == 1 and f"CORRAL_CORE {other!r}" in lines[0], lines


@pytest.mark.skipif(
    compiled_core.unusable() is not None, reason="no compiled core built from these sources (`make test-compiled`)"
)
@pytest.mark.parametrize(
    "command", [["-m", "tests.core.cross_build"], ["-m", "services.cli", "demo"]], ids=["seeded workload", "demo"]
)
def test_both_builds_of_the_core_decide_alike_byte_for_byte(command: list[str]) -> None:
    """A seeded workload's events (their digest) and `corral demo`'s placements and explanations: services of both
    builds fold one log, and a standby of one build takes over from a leader of the other."""
    said = {
        build: subprocess.run(
            [sys.executable, *command],
            env={**os.environ, compiled_core.SETTING: build},
            cwd=compiled_core.ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        ).stdout
        for build in compiled_core.BUILDS
    }
    assert said["source"] and said["source"] == said["compiled"]
