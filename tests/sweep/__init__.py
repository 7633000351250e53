"""Tests of parameter sweeps (sheaflinalg/sweep)."""
