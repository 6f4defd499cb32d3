"""The embedded mesh on this machine: nats-server and redis-server on free ports (servers.py) and the service
processes beside them (mesh.py); `corral up`, the demos, the benchmarks, the load test and the tests start it."""
