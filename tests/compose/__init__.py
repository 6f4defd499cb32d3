"""`make compose-test`: deploy/compose.yaml and deploy/compose.cluster.yaml started on a Docker engine and used as a
user would (the `corral` CLI on the published NATS port, the gateway's page, `/readyz`, each service's `/metrics`),
through a killed leading scheduler, a killed service and, on the cluster, a killed NATS server; not part of
`make test` (`python -m tests.compose --help`)."""
