"""Corral's tests, mirroring the source tree."""
