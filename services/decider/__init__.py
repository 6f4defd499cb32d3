"""A decision worker: decides scheduling requests against its own view and proposes them to the leading scheduler."""
