"""OpenTelemetry tracing and metrics: one provider of each per process; trace context travels in NATS headers.

Metrics are served for Prometheus on `/metrics` when `CORRAL_METRICS_PORT` is set, and spans and metrics go
over OTLP/HTTP when the standard `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from opentelemetry import context, metrics, propagate, trace

from services.runtime.settings import Settings, SettingsError

if TYPE_CHECKING:  # the SDK is imported by `configure` alone: a client or a service that exports nothing skips it
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

OTLP_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"

_configured = False


def configure(settings: Settings, service: str) -> None:
    """Install the tracer and meter providers once (raises `SettingsError` when the metrics port cannot be served).

    Spans: `none`, `console` (printed) or `memory` (kept in `memory()`) by `CORRAL_TRACING`, and over OTLP when
    `OTEL_EXPORTER_OTLP_ENDPOINT` is set. Metrics: on `/metrics` of `CORRAL_METRICS_PORT` (0: off), and over OTLP.
    """
    global _configured  # noqa: PLW0603 - the providers are process-wide by OpenTelemetry's design
    otlp = bool(os.environ.get(OTLP_ENDPOINT))
    if _configured or (settings.tracing == "none" and not settings.metrics_port and not otlp):
        return
    from opentelemetry.sdk.resources import Resource  # noqa: PLC0415

    resource = Resource.create({"service.name": service, "service.instance.id": settings.instance})
    if settings.tracing != "none" or otlp:
        trace.set_tracer_provider(_tracer_provider(resource, settings, otlp))
    if settings.metrics_port or otlp:
        metrics.set_meter_provider(_meter_provider(resource, settings, otlp))
    _configured = True


@functools.cache
def memory() -> InMemorySpanExporter:
    """Where a process started with `tracing="memory"` keeps its spans."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: PLC0415

    return InMemorySpanExporter()


def _tracer_provider(resource: Resource, settings: Settings, otlp: bool) -> TracerProvider:
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import (  # noqa: PLC0415
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )

    provider = TracerProvider(resource=resource)
    if settings.tracing != "none":
        exporter = ConsoleSpanExporter() if settings.tracing == "console" else memory()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    if otlp:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: PLC0415

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


def _meter_provider(resource: Resource, settings: Settings, otlp: bool) -> MeterProvider:
    from opentelemetry.sdk.metrics import MeterProvider  # noqa: PLC0415
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader  # noqa: PLC0415

    readers: list[MetricReader] = []
    if settings.metrics_port:
        readers.append(_serve_prometheus(settings.metrics_host, settings.metrics_port))
    if otlp:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter  # noqa: PLC0415

        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    return MeterProvider(metric_readers=readers, resource=resource)


def _serve_prometheus(host: str, port: int) -> MetricReader:
    """Serve `/metrics` on `host:port` (a thread of prometheus_client) from a reader of this process's metrics."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader  # noqa: PLC0415
    from prometheus_client import start_http_server  # noqa: PLC0415

    try:
        start_http_server(port, addr=host)
    except OSError as error:
        raise SettingsError(
            f"CORRAL_METRICS_PORT {port}: cannot serve /metrics on {host}:{port} (CORRAL_METRICS_HOST): {error}"
        ) from None
    return PrometheusMetricReader()


def meter() -> metrics.Meter:
    """The Corral meter (instruments made before `configure` follow the provider it installs)."""
    return metrics.get_meter("corral")


def tracer() -> trace.Tracer:
    """The Corral tracer."""
    return trace.get_tracer("corral")


def inject(headers: dict[str, str]) -> dict[str, str]:
    """Add the current trace context to `headers` (returned for chaining). With no context current (no span, no
    baggage: the scheduler's appends) no propagator has anything to add, and asking them costs an append several
    microseconds per event."""
    if context.get_current():
        propagate.inject(headers)
    return headers


@contextmanager
def span_from(headers: Mapping[str, str] | None, name: str) -> Iterator[trace.Span]:
    """A span named `name`, child of the trace context found in a message's headers."""
    token = context.attach(propagate.extract(dict(headers or {})))
    try:
        with tracer().start_as_current_span(name) as span:
            yield span
    finally:
        context.detach(token)
