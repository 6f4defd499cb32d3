"""The gateway: Corral's HTTP JSON API in front of the bus (stateless: it asks the services through the client)."""
