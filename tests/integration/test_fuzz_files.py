"""Fuzz suite for the files the CLI reads from a user (`corral submit -f FILE`, `corral vc create --spec @FILE`,
either from standard input with `-`), against one real mesh: hostile contents (random bytes, invalid UTF-8, deep
nesting, over the size limit, JSON of the wrong type, unknown fields, impossible amounts, empty), a directory or a
missing path instead of a file, and valid files (padded up to the size limit, too).

A refused file gives exit status 1, no traceback, and one line on stderr naming the option, the file and the
problem, and changes nothing in the mesh; a valid file is accepted; every service stays alive. `make test` runs
about CORRAL_FUZZ_EXAMPLES (default 100) files, each kind for each command in turn; `make fuzz` many more.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from schemas import ScheduleRequest, VirtualCluster
from services.cli.__main__ import main
from services.client import SyncClient
from services.core.documents import MAX_NESTING
from services.local.mesh import Mesh
from services.runtime.codec import MAX_BYTES, MAX_DEPTH
from tests.integration.conftest import LASTING_NODES, start_test_mesh
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.integration, pytest.mark.fuzz]

KNOWN = {
    command: {field.encode_name for field in msgspec.structs.fields(kind)}
    for command, kind in (("submit", ScheduleRequest), ("vc", VirtualCluster))
}
"""The fields each file may hold."""
EXAMPLES = int(os.environ.get("CORRAL_FUZZ_EXAMPLES", "100"))
COMMANDS = ("submit", "vc")
"""`corral submit -f FILE` and `corral vc create --spec @FILE`."""


@dataclass(frozen=True)
class Case:
    """One file to hand the CLI: its contents (None: `path` is used as it is), and whether it must be accepted."""

    data: bytes | None
    valid: bool = False
    path: str = ""

    def __repr__(self) -> str:
        shown = self.data if self.data is None or len(self.data) < 200 else self.data[:200] + b"..."
        return f"Case({shown!r}, path={self.path!r})"


def _json(value: Any) -> bytes:
    """`value` as JSON bytes."""
    return json.dumps(value).encode()


VALID_SUBMIT = st.fixed_dictionaries(
    {
        "actor_id": st.just("from-file"),
        "resources": st.dictionaries(st.sampled_from(["CPU", "memory"]), st.integers(0, 4)),
    },
    optional={
        "namespace": st.text("abcxyz-", min_size=1, max_size=8),
        "labels": st.dictionaries(st.text("abc", min_size=1, max_size=3), st.text("xyz", max_size=3), max_size=2),
        "priority": st.integers(-5, 5),
    },
)
VALID_VC = st.fixed_dictionaries(
    {},
    optional={
        "flexible_resource_min": st.fixed_dictionaries({"CPU": st.integers(0, 2)}),
        "flexible_resource_max": st.fixed_dictionaries({"CPU": st.integers(2, 4)}),
    },
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)
NOT_OBJECTS = st.lists(JSON_VALUES, max_size=3) | st.none() | st.booleans() | st.floats() | st.text(max_size=10)
FIELD_NAMES = st.text(st.sampled_from("x_\n\r\t\x00\u2028\u202e") | st.characters(), min_size=1, max_size=12)
"""Names of unknown fields, often with line breaks and control characters (an error message quotes the name)."""
BAD_AMOUNTS = st.sampled_from([b"-1", b"-0.5", b"1e999", b"-1e999", b'"NaN"', b"NaN", b"Infinity", b'"1"', b"null"])
BAD_UTF8 = st.sampled_from([b"\xed\xb3\xbf", b"\xff", b"\xc3", b"\x80abc", b"\xf4\x90\x80\x80"])


def alias_bomb(depth: int) -> bytes:
    """YAML whose nested aliases expand to 9**depth strings (refused for its first anchor)."""
    lines = [b'a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [b"a%d: &a%d [%s]" % (n, n, b", ".join([b"*a%d" % (n - 1)] * 9)) for n in range(1, depth + 1)]
    return b"\n".join(lines) + b"\n"


def valid_body(command: str) -> st.SearchStrategy[dict[str, Any]]:
    """Valid contents for `command`'s file, as a dict."""
    return VALID_SUBMIT if command == "submit" else VALID_VC


def cases(command: str) -> dict[str, st.SearchStrategy[Case]]:
    """Every kind of file for `command` by name; only the `valid` ones must be accepted."""
    amounts_field = b'"resources"' if command == "submit" else b'"flexible_resource_max"'
    prefix = b'{"actor_id": "x", ' if command == "submit" else b"{"
    body = valid_body(command)
    return {
        "valid": body.map(lambda body: Case(_json(body), valid=True)),
        "valid at the size limit": body.map(lambda body: Case(_json(body).ljust(MAX_BYTES), valid=True)),
        # Any bytes but a JSON object (both types are objects; `{}` is a valid VirtualCluster).
        "bytes": st.binary(max_size=64).filter(lambda b: not b.lstrip().startswith(b"{")).map(Case),
        "invalid utf-8": BAD_UTF8.map(lambda b: Case(prefix + b'"namespace": "' + b + b'"}')),
        "invalid utf-8 key": BAD_UTF8.map(lambda b: Case(prefix + b'"' + b + b'": 1}')),
        "deep": st.integers(MAX_DEPTH + 1, 5_000).map(lambda n: Case(b"[" * n + b"]" * n)),
        "deep field": st.integers(MAX_DEPTH, 2_000).map(
            lambda n: Case(prefix + b'"labels": ' + b"{" * n + b"}" * n + b"}")
        ),
        "over the size limit": st.tuples(body, st.integers(1, 4096)).map(
            lambda t: Case(_json(t[0]).ljust(MAX_BYTES + t[1]))
        ),
        "wrong type": NOT_OBJECTS.map(lambda v: Case(_json(v))),
        "unknown field": st.tuples(body, FIELD_NAMES, JSON_VALUES)
        .filter(lambda t: t[1] not in KNOWN[command])
        .map(lambda t: Case(_json({**t[0], t[1]: t[2]}))),
        "bad amount": BAD_AMOUNTS.map(lambda amount: Case(prefix + amounts_field + b': {"CPU": ' + amount + b"}}")),
        "yaml anchors": st.integers(1, 9).map(lambda depth: Case(alias_bomb(depth))),
        "yaml deep": st.integers(MAX_NESTING, 2_000).map(lambda n: Case(b"labels: " + b"[" * n + b"]" * n)),
        "empty": st.just(Case(b"")),
        "a directory": st.just(Case(None, path=".")),
        "missing": st.just(Case(None, path="no/such/file.json")),
    }


TURNS = [(command, family, strategy) for command in COMMANDS for family, strategy in cases(command).items()]
PER_TURN = max(2, -(-EXAMPLES // len(TURNS)))
"""Examples of each kind of file for each command (a random pick among the kinds would favour the first few)."""


class FileFuzzer:
    """One mesh with one big node, a client on it, and a counter for fresh actor and cluster ids."""

    def __init__(self, mesh: Mesh, client: SyncClient, folder: Path) -> None:
        self.mesh, self.client, self.folder = mesh, client, folder
        self.ids = itertools.count()

    def state(self) -> tuple[dict[str, str], bytes]:
        """What a refused file must not change: the placements and the virtual clusters."""
        return self.client.placements(), msgspec.json.encode(self.client.virtual_clusters())

    def run(
        self, command: str, case: Case, stdin: bool, capsys: pytest.CaptureFixture[str]
    ) -> tuple[int, str, str, str]:
        """Run the CLI in process on `case`; its status, stdout, stderr, and the source the CLI should name."""
        number = next(self.ids)
        source = case.path
        if case.data is not None:
            source = "-" if stdin else str(self.folder / f"{number}.json")
            if not stdin:
                Path(source).write_bytes(case.data)
        if command == "submit":
            argv, named = ["submit", f"a{number}", "-f", source], f"-f {source}"
        else:
            argv, named = ["vc", "create", f"vc{number}", "--spec", f"@{source}"], f"--spec @{source}"
        saved = sys.stdin
        sys.stdin = io.TextIOWrapper(io.BytesIO(case.data or b""))
        try:
            status = main([*argv, "--nats-url", self.mesh.nats_url, "--timeout", "10"])
        finally:
            sys.stdin = saved
        captured = capsys.readouterr()
        return status, captured.out, captured.err, named

    def assert_alive(self) -> None:
        exited = {key: code for key, process in self.mesh.processes.items() if (code := process.poll()) is not None}
        assert not exited, f"services exited: {exited}"


@pytest.fixture(scope="module")
def fuzzer(tmp_path_factory: pytest.TempPathFactory, server_path: ServerPath) -> Iterator[FileFuzzer]:
    """A mesh for the whole module with one node far larger than any valid file asks for."""
    mesh = start_test_mesh(tmp_path_factory.mktemp("fuzz-files"), server_path, settings=LASTING_NODES)
    try:
        with SyncClient(mesh.nats_url, timeout=10.0) as client:
            client.wait_ready(timeout=15.0)
            client.register_node("big", {"CPU": 1_000_000, "memory": 1_000_000})
            yield FileFuzzer(mesh, client, tmp_path_factory.mktemp("files"))
    finally:
        mesh.close()


@pytest.mark.parametrize(
    ("command", "kind"), [(command, strategy) for command, _, strategy in TURNS], ids=[f"{c}: {f}" for c, f, _ in TURNS]
)
@settings(
    max_examples=PER_TURN,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],  # examples change the mesh: a shrunk one would meet another mesh
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data(), stdin=st.booleans())
def test_a_hostile_file_is_refused_in_one_line_and_changes_nothing_and_a_valid_one_is_accepted(
    fuzzer: FileFuzzer,
    capsys: pytest.CaptureFixture[str],
    command: str,
    kind: st.SearchStrategy[Case],
    data: st.DataObject,
    stdin: bool,
) -> None:
    case = data.draw(kind, label="case")
    stdin = stdin and case.data is not None
    before = fuzzer.state()
    status, out, err, named = fuzzer.run(command, case, stdin, capsys)
    assert "Traceback" not in out + err
    if case.valid:
        assert status == 0, err
        assert out.count("\n") == 1 and not err
        if command == "submit":
            assert out.split()[1] in ("placed", "pending:"), out
        else:
            assert " admitted: " in out or " queued " in out, out
    else:
        assert status == 1, f"{case!r} gave status {status}: {out}{err}"
        assert not out
        prog = "corral submit" if command == "submit" else "corral vc create"
        assert err.startswith(f"{prog}: error: {named}: "), err
        assert err.endswith("\n") and err.count("\n") == 1 and len(err.splitlines()) == 1, repr(err)
        assert fuzzer.state() == before
    fuzzer.assert_alive()


def test_the_mesh_still_takes_a_file_after_the_fuzzing(fuzzer: FileFuzzer, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err, _ = fuzzer.run("submit", Case(b'{"actor_id": "x", "resources": {"CPU": 1}}'), False, capsys)
    assert status == 0 and out.endswith(" placed on big\n"), err
    fuzzer.assert_alive()


def corral(*argv: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """`corral argv` as a user runs it, in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *argv], input=stdin, capture_output=True, timeout=60, check=False
    )


@pytest.mark.parametrize(
    ("argv", "stdin", "says"),
    [
        (["submit", "-f", "/dev/zero"], b"", b"-f /dev/zero: over the 1048576-byte limit"),
        (
            ["submit", "-f", "-"],
            b"\xed\xb3\xbf" * 10,
            b"-f -: not a ScheduleRequest in JSON or YAML: not valid JSON",
        ),
        (
            ["submit", "-f", "-"],
            alias_bomb(9),
            b"-f -: anchors and aliases (&name, *name) are not allowed in this file",
        ),
        (["vc", "create", "v", "--spec", os.fsdecode(b'{"\xff": 1}')], b"", b"--spec: not a VirtualCluster spec: "),
        (["vc", "create", "v", "--spec", "@-"], b'{"x\\n\\u2028y": 1}', b"unknown field `x\\n\\u2028y`"),
    ],
)
def test_a_refused_file_or_spec_in_a_process_of_its_own_gives_one_line(
    fuzzer: FileFuzzer, argv: list[str], stdin: bytes, says: bytes
) -> None:
    before = fuzzer.state()
    done = corral(*argv, "--nats-url", fuzzer.mesh.nats_url, stdin=stdin)
    assert done.returncode == 1 and not done.stdout
    assert len(done.stderr.splitlines()) == 1 and says in done.stderr, done.stderr
    assert fuzzer.state() == before
    fuzzer.assert_alive()
