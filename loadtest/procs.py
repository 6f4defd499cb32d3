"""CPU used by the processes of the mesh during a phase, read from /proc (Linux; elsewhere nothing is reported)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds a process has used so far (None when it cannot be read)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


class CpuMeter:
    """Share of one core each named process used between `start()` and `stop()` (1.0 = one core busy)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = dict(pids)
        self.before: dict[str, float] = {}
        self.began = 0.0

    def start(self) -> None:
        """Take the first reading."""
        self.began = time.perf_counter()
        self.before = {name: used for name, pid in self.pids.items() if (used := cpu_seconds(pid)) is not None}

    def stop(self) -> dict[str, float]:
        """Core shares since `start()`, by process name."""
        elapsed = time.perf_counter() - self.began
        shares = {}
        for name, before in self.before.items():
            after = cpu_seconds(self.pids[name])
            if after is not None and elapsed > 0:
                shares[name] = round((after - before) / elapsed, 4)
        return shares

    async def window(self, after: float, seconds: float) -> dict[str, float]:
        """Core shares over the `seconds` that begin `after` seconds from now (a phase's measured window)."""
        await asyncio.sleep(after)
        self.start()
        await asyncio.sleep(seconds)
        return self.stop()
