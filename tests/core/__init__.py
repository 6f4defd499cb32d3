"""Tests of the pure scheduling core: table-driven rules from the proposals and property tests."""
