"""`python -m loadtest.leader_instructions` counts the leading scheduler's instructions per request it acked (the
options it shares with `leader_steps` are tested there)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadtest.leader_instructions import callgrind_total, main, per_request

DUMP = b"""# callgrind format
version: 1
cmd: python -m services.scheduler
part: 1
events: Ir
summary: 1200
fn=main
1 1200
totals: 1200
"""
AT_EXIT = b"version: 1\npart: 2\nevents: Ir\nsummary: 0\ntotals: 0\n"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--settle", "nan"], "argument --settle: 'nan' must be a number of seconds above 0"),
        (["--seconds", "0"], "argument --seconds: '0' must be a number of seconds above 0"),
        (["--batch", "1001"], "argument --batch: '1001' must be at most 1,000"),
    ],
)
def test_a_bad_option_of_its_own_is_refused_naming_it_before_any_mesh_starts(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2 and says in capsys.readouterr().err


def test_without_valgrind_the_tool_says_what_to_install_before_any_mesh_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "callgrind_control" else f"/usr/bin/{tool}")
    with pytest.raises(SystemExit) as refused:
        main([])
    said = capsys.readouterr().err
    assert refused.value.code == 2 and "callgrind_control not found: install valgrind" in said


def test_the_count_is_every_dump_s_totals_and_a_file_without_any_is_an_error() -> None:
    assert callgrind_total([DUMP, AT_EXIT]) == 1200
    assert callgrind_total([DUMP, DUMP]) == 2400
    with pytest.raises(ValueError, match="no totals line"):
        callgrind_total([b"version: 1\n"])


def test_requests_are_the_messages_acked_while_counting_times_the_batch() -> None:
    assert per_request(2_000_000, 100, 150, 20) == {
        "instructions": 2_000_000,
        "requests": 1000,
        "instructions_per_request": 2000,
    }
    assert per_request(5_000, 7, 7, 20)["instructions_per_request"] is None  # nothing acked: no figure, not 0


def test_an_ack_floor_that_went_back_counts_no_request() -> None:
    assert per_request(9_000, 50, 40, 20) == {"instructions": 9_000, "requests": 0, "instructions_per_request": None}


@given(st.lists(st.binary(max_size=2_000), max_size=4), st.lists(st.integers(0, 10**30), max_size=4))
def test_any_bytes_in_the_output_files_give_the_sum_of_their_totals_lines_or_say_there_is_none(
    noise: list[bytes], totals: list[int]
) -> None:
    """Whatever else a file holds (a truncated dump, binary garbage, a line that only looks like a total), the count is
    the sum of its well-formed `totals:` lines, and a set of files with none is refused, never read as 0."""
    files = [junk.replace(b"totals:", b"total:") for junk in noise]
    files += [b"summary: 1\ntotals: %d\n" % total for total in totals]
    if totals:
        assert callgrind_total(files) == sum(totals)
    else:
        with pytest.raises(ValueError, match="no totals line"):
            callgrind_total(files)


@pytest.mark.integration
@pytest.mark.bench
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind (Debian's package) is not installed")
@pytest.mark.parametrize("workers", [0, 1])
def test_a_small_run_counts_instructions_for_the_requests_acked(workers: int) -> None:
    """The scheduler deciding alone, then the applier of a decision worker."""
    command = [sys.executable, "-m", "loadtest.leader_instructions", "--nodes", "20", "--users", "2"]
    command += ["--settle", "1", "--seconds", "3", "--decision-workers", str(workers), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout)
    assert figures["decision_workers"] == workers
    assert figures["requests"] > 0 and figures["requests"] % figures["batch"] == 0
    # an interpreter's request costs thousands of instructions at the very least, and far less than a billion
    assert 10_000 < figures["instructions_per_request"] < 1_000_000_000
