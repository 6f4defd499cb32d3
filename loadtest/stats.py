"""Latency and outcome bookkeeping per request name, and the figures of one phase (like locust's stats)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TypedDict

from loadtest.transport import Result


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list (0 for an empty one)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


class Latency(TypedDict):
    """Latency figures in milliseconds."""

    p50: float
    p95: float
    p99: float
    max: float
    mean: float


def latency(values_ms: list[float]) -> Latency:
    """p50, p95, p99, max and mean of some latencies (milliseconds, rounded to 0.01)."""
    ordered = sorted(values_ms)
    mean = sum(ordered) / len(ordered) if ordered else 0.0
    return Latency(
        p50=round(percentile(ordered, 0.50), 2),
        p95=round(percentile(ordered, 0.95), 2),
        p99=round(percentile(ordered, 0.99), 2),
        max=round(ordered[-1] if ordered else 0.0, 2),
        mean=round(mean, 2),
    )


class Row(TypedDict):
    """One line of the summary table: a request name and its figures."""

    name: str
    requests: int
    placed: int
    pending: int
    accepted: int
    errors: int
    requests_per_s: float
    latency_ms: Latency


@dataclass
class Tally:
    """Outcomes and latencies of one request name."""

    latencies_ms: list[float] = field(default_factory=list)
    placed: int = 0
    pending: int = 0
    accepted: int = 0
    errors: int = 0
    first_error: str = ""

    def add(self, result: Result) -> None:
        """Count one result (its latency too, unless it failed)."""
        if result.outcome == "error":
            self.errors += 1
            self.first_error = self.first_error or result.detail
            return
        self.latencies_ms.append((result.finished - result.started) * 1000.0)
        if result.outcome == "placed":
            self.placed += 1
        elif result.outcome == "pending":
            self.pending += 1
        else:
            self.accepted += 1

    def merge(self, other: Tally) -> None:
        """Add another tally's counts and latencies to this one."""
        self.latencies_ms.extend(other.latencies_ms)
        self.placed += other.placed
        self.pending += other.pending
        self.accepted += other.accepted
        self.errors += other.errors
        self.first_error = self.first_error or other.first_error

    @property
    def requests(self) -> int:
        """Every result counted."""
        return self.placed + self.pending + self.accepted + self.errors

    def row(self, name: str, seconds: float) -> Row:
        """This tally as a table row over a window of `seconds`."""
        return Row(
            name=name,
            requests=self.requests,
            placed=self.placed,
            pending=self.pending,
            accepted=self.accepted,
            errors=self.errors,
            requests_per_s=round(self.requests / seconds, 1) if seconds > 0 else 0.0,
            latency_ms=latency(self.latencies_ms),
        )


@dataclass
class Recorder:
    """Counts the results of requests published inside the measured window [start, end)."""

    start: float
    end: float
    tallies: dict[str, Tally] = field(default_factory=dict)
    placed_latencies_ms: list[float] = field(default_factory=list)
    outside: int = 0

    def add(self, name: str, result: Result) -> None:
        """Count one result under `name` if it was published inside the window."""
        if not self.start <= result.started < self.end:
            self.outside += 1
            return
        self.tallies.setdefault(name, Tally()).add(result)
        if result.outcome == "placed":
            self.placed_latencies_ms.append((result.finished - result.started) * 1000.0)

    @property
    def seconds(self) -> float:
        """The measured window's length."""
        return self.end - self.start

    def absorb(self, other: Recorder) -> None:
        """Count another recorder's results too (the caller sets the window their lengths add up to)."""
        for name, tally in other.tallies.items():
            self.tallies.setdefault(name, Tally()).merge(tally)
        self.placed_latencies_ms += other.placed_latencies_ms
        self.outside += other.outside

    def rows(self, order: list[str]) -> list[Row]:
        """One row per request name (in `order`, then any others), then the aggregate of them all."""
        names = [name for name in order if name in self.tallies]
        names += sorted(name for name in self.tallies if name not in names)
        total = Tally()
        rows = []
        for name in names:
            rows.append(self.tallies[name].row(name, self.seconds))
            total.merge(self.tallies[name])
        rows.append(total.row("Aggregated", self.seconds))
        return rows

    def first_error(self) -> str:
        """The first failure seen, for the report ("" when none)."""
        return next((tally.first_error for tally in self.tallies.values() if tally.first_error), "")
