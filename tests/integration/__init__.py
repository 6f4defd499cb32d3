"""End-to-end tests through the bus, against a real nats-server (JetStream) and a real redis-server."""
