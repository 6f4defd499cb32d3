"""Locust-style load test of a running Corral mesh: durable placements/s, the bus floor, p99 at a fixed rate."""
