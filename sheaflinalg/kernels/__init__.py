"""numba-compiled kernels (no Python API here; see dynamics.py and training.py)."""
