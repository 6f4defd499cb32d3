"""How many examples a property test draws: its full count in `make test-properties` (and with plain `pytest`),
a tenth in `make test`, a quarter in `make test-fast`.

`CORRAL_EXAMPLES_PERCENT` (a whole number from 1 to 100; 100 when unset) scales every count that goes through
`examples`, so the quicker loops keep every property and draw fewer cases of each."""

from __future__ import annotations

import os

VARIABLE = "CORRAL_EXAMPLES_PERCENT"


def percent(environ: dict[str, str] | os._Environ[str] = os.environ) -> int:
    """The share of examples to draw, checked."""
    text = environ.get(VARIABLE, "100")
    if not text.isdigit() or not 1 <= int(text) <= 100:
        raise ValueError(f"{VARIABLE} {text!r}: must be a whole number from 1 to 100")
    return int(text)


SHARE = percent()


def examples(full: int) -> int:
    """`full` examples scaled by `CORRAL_EXAMPLES_PERCENT` (at least one)."""
    return max(1, full * SHARE // 100)
