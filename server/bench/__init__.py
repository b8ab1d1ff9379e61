"""Benchmark and load tools run on demand (not part of the running server)."""
