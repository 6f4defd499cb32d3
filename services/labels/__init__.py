"""The labels service: node registration, label changes, liveness, and queries by node and actor labels."""
