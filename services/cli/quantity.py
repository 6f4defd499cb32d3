"""Resource quantities read with the Kubernetes suffixes: `4Gi`, `500m`, `1.5`, `2k` (services.core.amounts spells
them out: `format_amount`).

Corral's amounts are plain numbers (memory in bytes, CPU in cores); the suffixes only scale them: binary `Ki Mi Gi
Ti Pi Ei` (powers of 1024), decimal `k M G T P E` (powers of 1000) and `m` (thousandths).
"""

from __future__ import annotations

import math
import re

from services.core.amounts import SUFFIXES, format_amount, format_quantity
from services.core.errors import rule_error

__all__ = ["RULE", "format_amount", "format_quantity", "parse_quantity"]

RULE = "must be a number >= 0, optionally with a suffix: m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi or Ei (4Gi, 500m)"
_QUANTITY = re.compile(r"(?P<number>[+]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)(?P<suffix>[A-Za-z]{0,2})")


def parse_quantity(field: str, text: str) -> float:
    """`text` as an amount: `RejectedError` naming `field`, the value and the rule when it is not a quantity."""
    match = _QUANTITY.fullmatch(text.strip())
    if match is None or match["suffix"] not in ("", *SUFFIXES):
        raise rule_error(field, text, RULE)
    value = float(match["number"]) * SUFFIXES.get(match["suffix"], 1.0)
    if not math.isfinite(value):
        raise rule_error(field, text, RULE)
    return value
