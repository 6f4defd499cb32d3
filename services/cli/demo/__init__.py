"""The demos: `corral demo` in-process (`inprocess`), and through an embedded mesh (`python -m
services.cli.demo.mesh`, what `make run` runs); both share the workload and the tenants act."""
