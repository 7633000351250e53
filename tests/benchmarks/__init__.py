"""Tests of the benchmarks' shared code (benchmarks/)."""
