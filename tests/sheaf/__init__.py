"""Tests of the sheaf layer: assembly, pins, harmonic extension, certificates (sheaflinalg/sheaf)."""
