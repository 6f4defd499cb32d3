"""Every Corral metric, made once here through the OpenTelemetry metrics API (exported as `telemetry` sets up).

Instruments made before `telemetry.configure` follow the provider it installs; with none installed they cost a
no-op call. Gauges read a service's state when a reader collects (a scrape), never on the hot path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from opentelemetry.metrics import CallbackOptions, Observation

from services.runtime.telemetry import meter

_meter = meter()

Attributes = Mapping[str, str]
Readings = Callable[[], Iterable[tuple[float, Attributes]]]
"""What a gauge reads at collection: (value, attributes) pairs."""

SECONDS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Histogram buckets for durations: 100 µs to 10 s."""

DECISION_SECONDS = _meter.create_histogram(
    "corral.scheduler.decision.duration",
    unit="s",
    description="Time the scheduler took to decide one message of the work queue: a request, or a batch of them",
    explicit_bucket_boundaries_advisory=SECONDS,
)
REQUEST_SECONDS = _meter.create_histogram(
    "corral.scheduler.request.latency",
    unit="s",
    description="From a message stored in the work queue (a request, or a batch) to its decision",
    explicit_bucket_boundaries_advisory=SECONDS,
)
ELECTIONS = _meter.create_counter(
    "corral.leader.elections", unit="{election}", description="Elections this process won (lease taken or taken again)"
)
SNAPSHOT_BUILD_SECONDS = _meter.create_histogram(
    "corral.snapshot.build.duration",
    unit="s",
    description="Time to encode the view's snapshot",
    explicit_bucket_boundaries_advisory=SECONDS,
)
LAUNCHES = _meter.create_counter(
    "corral.autoscaler.launches", unit="{node}", description="Nodes the autoscaler asked its provider to launch"
)
TERMINATIONS = _meter.create_counter(
    "corral.autoscaler.terminations", unit="{node}", description="Nodes the autoscaler terminated"
)

GATEWAY_REQUESTS = _meter.create_counter(
    "corral.gateway.requests", unit="{request}", description="HTTP requests answered, by route, method and status"
)
GATEWAY_SECONDS = _meter.create_histogram(
    "corral.gateway.request.duration",
    unit="s",
    description="Time to answer an HTTP request",
    explicit_bucket_boundaries_advisory=SECONDS,
)


def gateway_request(route: str, method: str, status: int, seconds: float) -> None:
    """Count and time one HTTP request of the gateway; `route` is its template (`/api/v1/actors/{id}/why`), never
    the raw path, so the label has a bounded set of values."""
    attributes = {"route": route, "method": method, "status": str(status)}
    GATEWAY_REQUESTS.add(1, attributes)
    GATEWAY_SECONDS.record(seconds, attributes)


def gauge(name: str, unit: str, description: str, readings: Readings) -> None:
    """An observable gauge that reports `readings()` at each collection (one per process and name)."""
    _meter.create_observable_gauge(name, callbacks=[_observer(readings)], unit=unit, description=description)


def total(name: str, unit: str, description: str, readings: Readings) -> None:
    """An observable counter (a running total the service keeps as a plain number) reported at each collection."""
    _meter.create_observable_counter(name, callbacks=[_observer(readings)], unit=unit, description=description)


def _observer(readings: Readings) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def observe(_options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(value, attributes) for value, attributes in readings()]

    return observe


def one(read: Callable[[], float]) -> Readings:
    """Readings of a single unlabelled value."""
    return lambda: [(read(), {})]
