"""The taints service: append and delete node taints by node id or address; rare-resource isolation."""
