"""Tests of spectra (sheaflinalg/spectral)."""
