"""The shell kit every service and the client share: bus, codec, snapshots, lease, runner, settings, telemetry."""
