"""Test tooling (servers in Docker containers, the choice between them and the local binaries): imported by tests/
and the load tests, never by a service or the CLI."""
