"""The garbage collector, paused around bursts of short-lived objects that would set off full collections."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused(*, collect_after: bool = False) -> Iterator[None]:
    """No garbage collection inside the block (reference counting still frees what is dropped).

    A burst of allocations makes the collector walk every tracked object of the process again and again: a
    110,000-record snapshot took 0.52 s to build instead of 0.06 s. `collect_after` runs one collection at the end.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        if collect_after:
            gc.collect()
