"""The chaos run (`python -m loadtest.chaos`): mixed load while pieces of the mesh are killed and restarted."""
