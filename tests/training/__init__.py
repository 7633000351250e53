"""Tests of training: joint dynamics, IMEX, equilibrium propagation, SGD, optimisers (sheaflinalg/training)."""
