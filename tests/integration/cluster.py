"""A NATS cluster on loopback for the tests: the load test's (`services.cli.cluster`), three servers by default."""

from __future__ import annotations

from services.cli.cluster import NatsCluster, start_cluster, wait_for_jetstream

__all__ = ["NatsCluster", "start_cluster", "wait_for_jetstream"]
