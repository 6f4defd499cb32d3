"""The bus floor: the same load on streams of its own, answered by a decider that decides nothing (decider.py),
driven from several generator processes (drive.py)."""
