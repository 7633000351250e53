"""Tests of the compiled kernels (sheaflinalg/kernels)."""
