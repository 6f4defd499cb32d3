"""Services forked from the preloaded parent behave as `python -m services.NAME` does: their own process, their
environment, their log file, their exit code and their signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.local import preloaded
from services.local.servers import free_port


def environment(**settings: str) -> dict[str, str]:
    """This process's environment with `settings` over it."""
    return {**os.environ, **settings}


def test_a_bad_setting_exits_with_code_2_and_names_it_in_the_service_s_log(tmp_path: Path) -> None:
    log = tmp_path / "labels.log"
    process = preloaded.start("labels", environment(CORRAL_LEASE_TTL="soon"), log)
    assert log.exists(), "the log is there once the start returns"
    assert process.wait(timeout=30) == 2
    assert process.pid != os.getpid() and process.poll() == 2
    assert "corral labels:" in log.read_text() and "CORRAL_LEASE_TTL" in log.read_text()


def test_sigterm_stops_a_service_that_waits_for_nats_and_sigkill_ends_one_at_once(tmp_path: Path) -> None:
    unreachable = environment(CORRAL_NATS_URL=f"nats://127.0.0.1:{free_port()}", CORRAL_INSTANCE="t1")
    waiting = preloaded.start("taints", unreachable, tmp_path / "taints.log")
    killed = preloaded.start("vclusters", unreachable, tmp_path / "vclusters.log")
    deadline = time.monotonic() + 30
    while "taints" not in (tmp_path / "taints.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.05)  # it runs: it says it cannot connect yet
    assert waiting.poll() is None
    waiting.send_signal(signal.SIGTERM)
    killed.kill()
    assert killed.wait(timeout=30) == -signal.SIGKILL
    code = waiting.wait(timeout=30)
    assert code != -signal.SIGTERM, "the service's own handler stopped it, not the signal's default action"
    with pytest.raises(ProcessLookupError):
        os.kill(waiting.pid, 0)


def test_a_forked_service_is_named_after_what_it_runs(tmp_path: Path) -> None:
    unreachable = environment(CORRAL_NATS_URL=f"nats://127.0.0.1:{free_port()}", CORRAL_INSTANCE="t1")
    process = preloaded.start("scheduler", unreachable, tmp_path / "scheduler.log")
    try:
        deadline = time.monotonic() + 30
        while (name := Path(f"/proc/{process.pid}/comm").read_text().strip()) != "corral-schedule":
            assert time.monotonic() < deadline, name
            time.sleep(0.05)
    finally:
        process.kill()


MAIN_SCRIPT = """
import os, sys
from pathlib import Path
with Path(sys.argv[1]).open("a") as runs:
    runs.write(f"{__name__}\\n")
if __name__ == "__main__":
    from services.local import preloaded
    log = Path(sys.argv[1]).with_name("labels.log")
    service = preloaded.start("labels", {**os.environ, "CORRAL_LEASE_TTL": "soon"}, log)
    sys.exit(0 if service.wait(timeout=30) == 2 else 1)
"""


def test_a_forked_service_does_not_run_its_parents_main_script_again(tmp_path: Path) -> None:
    script = tmp_path / "starter.py"
    script.write_text(MAIN_SCRIPT)
    runs = tmp_path / "runs.txt"
    root = Path(__file__).resolve().parents[2]
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    subprocess.run([sys.executable, str(script), str(runs)], env=environ, check=True, timeout=60)
    assert runs.read_text().splitlines() == ["__main__"], "run once, as the main of the parent, never in a child"
