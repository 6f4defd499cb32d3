"""Corral's code: the pure core, the runtime kit, the services, the client and the CLI."""
