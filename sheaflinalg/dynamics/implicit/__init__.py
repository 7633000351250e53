"""The heat equation of graph networks by a linearly implicit (Rosenbrock-Euler) scheme.

:mod:`.settings` (its options, validated), :mod:`.cg` (preconditioned conjugate gradients, one system per
sample), :mod:`.system` (the step's linear system at a state, matrix-free), :mod:`.run` (the steps, the step
control and the result).  It reads residuals, forces and records the way forward Euler on graphs does
(:mod:`sheaflinalg.dynamics.euler.graph`).
"""
