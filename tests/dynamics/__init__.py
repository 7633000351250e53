"""Tests of the heat equation and the exact flow (sheaflinalg/dynamics)."""
