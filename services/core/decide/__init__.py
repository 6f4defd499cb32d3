"""Deciding one piece of work from the registered rules: an actor or task, or a placement group (pure)."""
