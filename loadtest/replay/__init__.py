"""The start-up replay benchmark (`python -m loadtest.replay`): a log made by the core, replayed and timed."""
