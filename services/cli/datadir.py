"""One `corral up` per data directory: an advisory lock held for the life of the process, naming its holder."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from services.cli.common import CliError

LOCK_FILE = "corral-up.lock"
"""In the data directory: locked while a `corral up` uses it, holding that process's id and start time."""


@contextlib.contextmanager
def data_dir_lock(data_dir: Path) -> Iterator[None]:
    """Hold `data_dir` for this process, or a `CliError` naming the process that holds it (or why it is unusable).

    The lock is the kernel's (`flock`): it ends with the process, even one killed with SIGKILL.
    """
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        handle = (data_dir / LOCK_FILE).open("a+")
    except OSError as error:  # a file where the directory should be, no permission, ...
        raise CliError(f"--data-dir {data_dir}: cannot use it as a directory ({error.strerror or error})") from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "a process that is still starting"
        handle.close()
        raise CliError(
            f"--data-dir {data_dir}: already used by another `corral up` ({holder}); "
            "stop it first or pick another --data-dir"
        ) from None
    try:
        started = datetime.now().astimezone().isoformat(timespec="seconds")
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}, started {started}\n")
        handle.flush()
        yield
    finally:
        handle.close()
