"""Tests of the paper's reproduction (sheaflinalg/reproduce)."""
