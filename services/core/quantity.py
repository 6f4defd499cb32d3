"""Amounts as the Kubernetes suffixes spell them (pure): `4Gi` for memory, `2k`, `500m`, `1.5` for the rest.

Corral's amounts are plain numbers (memory in bytes, CPU in cores); the suffixes only scale them: binary `Ki Mi Gi
Ti Pi Ei` (powers of 1024), decimal `k M G T P E` (powers of 1000) and `m` (thousandths). The CLI's tables and the
web page (its script ports `format_quantity`) write amounts this way.
"""

from __future__ import annotations

import math

SUFFIXES: dict[str, float] = {
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}
_BINARY_FIRST = ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki")
_DECIMAL_FIRST = ("E", "P", "T", "G", "M", "k")


def format_quantity(value: float, *, binary: bool = False) -> str:
    """`value` in its shortest exact spelling: `4Gi` (with `binary`, for memory), `2k`, `500m`, `1.5`, `0`."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    for suffix in _BINARY_FIRST if binary else _DECIMAL_FIRST:
        scaled = value / SUFFIXES[suffix]
        if abs(scaled) >= 1 and scaled == round(scaled, 3):
            return f"{scaled:g}{suffix}"
    if abs(value) < 1 and value * 1000 == round(value * 1000):
        return f"{value * 1000:g}m"
    return f"{value:g}"


def format_amount(name: str, value: float) -> str:
    """A resource's amount for a table: memory-like resources in binary units (`4Gi`), the others decimal."""
    return format_quantity(value, binary="memory" in name.lower())
