"""The NATS cluster on loopback the tests start (it lives with the embedded mesh: the load test's `--replicas`
starts it too)."""

from services.local.cluster import NatsCluster, start_cluster, wait_for_jetstream

__all__ = ["NatsCluster", "start_cluster", "wait_for_jetstream"]
