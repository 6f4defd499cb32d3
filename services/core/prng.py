"""A small seeded pseudo-random generator (splitmix64), so decisions are reproducible without `random` (pure)."""

from __future__ import annotations

import hashlib
from typing import Final

_MASK: Final = (1 << 64) - 1


class SplitMix64:
    """Deterministic 64-bit generator; the same seed gives the same sequence in every process."""

    __slots__ = ("state",)

    def __init__(self, seed: int) -> None:
        self.state = seed & _MASK

    def next(self) -> int:
        """The next 64-bit value."""
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def below(self, bound: int) -> int:
        """A value in `range(bound)` (bound > 0)."""
        return self.next() % bound


def stable_hash(seed: int, text: str) -> int:
    """A 64-bit hash of `text` under `seed`, the same in every process (unlike `hash()`)."""
    digest = hashlib.blake2b(text.encode(), digest_size=8, key=seed.to_bytes(8, "little", signed=False))
    return int.from_bytes(digest.digest(), "little")
