"""Tests of figures (sheaflinalg/plotting)."""
