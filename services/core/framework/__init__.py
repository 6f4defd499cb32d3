"""The scheduling framework below the rules: plugin protocols and ranks, the pipeline, the rule registry (pure)."""
