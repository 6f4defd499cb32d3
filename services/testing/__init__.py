"""Test tooling (the servers in Docker containers, and the choice between them and the local binaries): imported
by tests/, never by a service or the CLI."""
