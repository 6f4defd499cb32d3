"""The trace context an append carries: the current span's when there is one, nothing (and no propagator asked)
when no context is current, as on the scheduler's appends."""

from __future__ import annotations

import pytest
from opentelemetry import baggage, context, propagate, trace
from opentelemetry.sdk.trace import TracerProvider

from services.runtime import telemetry


def test_a_current_span_and_baggage_travel_in_the_headers() -> None:
    tracer = TracerProvider().get_tracer("test")
    token = context.attach(baggage.set_baggage("tenant", "t1"))
    try:
        with tracer.start_as_current_span("command") as span:
            headers = telemetry.inject({"Nats-Msg-Id": "e1"})
    finally:
        context.detach(token)
    assert headers["Nats-Msg-Id"] == "e1"
    assert f"{span.get_span_context().trace_id:032x}" in headers["traceparent"]
    assert headers["baggage"] == "tenant=t1"


def test_with_no_context_current_the_headers_are_left_and_no_propagator_is_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[dict[str, str]] = []
    monkeypatch.setattr(propagate, "inject", lambda carrier, *args, **kwargs: asked.append(carrier))
    assert not trace.get_current_span().get_span_context().is_valid
    assert telemetry.inject({"Nats-Msg-Id": "e2"}) == {"Nats-Msg-Id": "e2"}
    assert asked == []
