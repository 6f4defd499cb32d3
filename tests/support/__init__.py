"""Test tooling, kept out of the shipped package (the servers in Docker containers, and the choice between them and
the local binaries): imported by the tests, never by a service, the client or the CLI."""
