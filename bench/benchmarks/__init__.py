"""Benchmark scripts (run by hand, numbers go to BENCHMARKS.md); not tests, not imported by the CLI."""
