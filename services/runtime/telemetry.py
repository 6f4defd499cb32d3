"""OpenTelemetry tracing: one provider per process; trace context travels in NATS headers."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry import context, propagate, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from services.runtime.settings import Tracing

MEMORY = InMemorySpanExporter()
"""Spans of a process started with `tracing="memory"` (tests read them here)."""

_configured = False


def configure(mode: Tracing, service: str) -> None:
    """Install the tracer provider once: `none`, `console` (spans printed) or `memory` (kept in `MEMORY`)."""
    global _configured  # noqa: PLW0603 - the provider is process-wide by OpenTelemetry's design
    if _configured or mode == "none":
        return
    from opentelemetry.sdk.resources import Resource  # noqa: PLC0415 - only when tracing is on

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter = ConsoleSpanExporter() if mode == "console" else MEMORY
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _configured = True


def tracer() -> trace.Tracer:
    """The Corral tracer."""
    return trace.get_tracer("corral")


def inject(headers: dict[str, str]) -> dict[str, str]:
    """Add the current trace context to `headers` (returned for chaining)."""
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
