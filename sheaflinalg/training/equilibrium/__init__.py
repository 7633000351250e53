"""Quasi-static training: exact equilibria of the state, weights stepped by an optimiser.

For fixed weights the state that minimises the sheaf energy plus the output
edge's loss potential (weighted by the *nudging*) is found exactly, and the
weights move by the gradient of that equilibrium energy (envelope theorem),
divided by the nudging: the ``beta -> 0`` limit of the paper's joint dynamics
at nudging 1, backpropagation's gradient as the nudging goes to 0.

``oracle`` (the contract: an :class:`~.oracle.EquilibriumOracle` turns weights
and a mini-batch into that gradient and a :class:`~.oracle.SettleReport`),
``settings`` (the options of ``train(method="equilibrium")``), ``run`` (the
epochs of mini-batches and optimiser steps).
"""

from .run import UnsettledWarning, run_equilibrium
from .settings import DEFAULTS

__all__ = ["run_equilibrium", "UnsettledWarning", "DEFAULTS"]
