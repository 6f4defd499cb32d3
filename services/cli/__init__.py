"""The `corral` command: the in-process demo and the benchmarks (more subcommands come with the services)."""
