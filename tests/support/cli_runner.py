"""`corral` in a process of its own, forked from a parent that imported the CLI once.

A fresh `python -m services.cli` spends about half a second of CPU importing the CLI before it does anything, and
the integration tests run dozens of commands. The runner is one process per test process, single-threaded (so
forking it is safe), that imported `services.cli.__main__`; each command is a child forked from it with the
environment, arguments, exit status and output a fresh `python -m services.cli` would have.

Its protocol, one JSON line each way: {"argv", "env", "cwd", "out", "err"} in; {"pid"} once forked, then {"code"} (minus
the signal that ended it, as `subprocess` says it).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import IO, Any

from services.cli.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
SERVE = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from tests.support.cli_runner import serve; serve()"
"""The runner's program: from any folder, as the repository is put on its path rather than found from it."""


class CliRunner:
    """The test process's end of a runner: `run` is one command, one at a time."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        self._running: int | None = None
        self._killed = False

    def run(self, argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        """`corral ARGV` in the current environment; `TimeoutError` (the command killed) past `timeout` seconds."""
        with self._lock, tempfile.TemporaryDirectory(prefix="corral-cli-") as folder:
            out, err = Path(folder) / "out", Path(folder) / "err"
            pipe_in, pipe_out = self._pipes()
            request = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd(), "out": str(out), "err": str(err)}
            pipe_in.write(json.dumps(request) + "\n")
            pipe_in.flush()
            self._running, self._killed = json.loads(pipe_out.readline())["pid"], False
            timer = threading.Timer(timeout, self._kill_running)
            timer.start()
            try:
                code = json.loads(pipe_out.readline())["code"]
            finally:
                timer.cancel()
                self._running = None
            if self._killed:
                raise TimeoutError(f"corral {' '.join(argv)}: still running after {timeout:g} s, killed")
            return subprocess.CompletedProcess(["corral", *argv], code, out.read_text(), err.read_text())

    def _kill_running(self) -> None:
        if self._running is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._running, signal.SIGKILL)
                self._killed = True

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, "-c", SERVE],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            atexit.register(self._process.kill)
        assert self._process.stdin is not None and self._process.stdout is not None
        return self._process.stdin, self._process.stdout


RUNNER = CliRunner()
"""This process's runner, started at its first command."""


def serve() -> None:
    """The runner (its module imported the CLI): a child forked per command read from stdin."""
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)


def _child(request: dict[str, Any]) -> None:
    """In the forked child: the command's environment, no input, its output files, then `corral ARGV`; never
    returns."""
    code = 1
    try:
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        for fd, path, flags in (
            (0, os.devnull, os.O_RDONLY),
            (1, request["out"], os.O_WRONLY | os.O_CREAT),
            (2, request["err"], os.O_WRONLY | os.O_CREAT),
        ):
            target = os.open(path, flags, 0o600)
            os.dup2(target, fd)
            os.close(target)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - not the runner's buffer of the protocol's lines
        sys.argv = ["corral", *request["argv"]]
        try:
            code = main(request["argv"])
        except SystemExit as exit_:  # as the interpreter ends on one: a message goes to stderr with status 1
            if exit_.code is not None and not isinstance(exit_.code, int):
                print(exit_.code, file=sys.stderr)
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:  # a traceback on stderr and status 1, as an uncaught error gives
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
