"""Spectral diagnostics of the restricted Laplacian: the coboundary as an operator, ARPACK's two
ends in lockstep, the dense path for small systems, the result object, the drivers
(``spectrum``, ``spectrum_of_system``) and the training tracker.

May import ``sheaf``, ``network``, ``kernels`` and ``_common``.
"""

from .arpack import SpectrumConvergenceError
from .energy import edge_energy
from .drivers import DENSE_MAX, TOL, IllConditionedSpectrumError, spectrum, spectrum_of_system
from .operators.chain import CoboundaryOperator
from .result import SpectrumResult
from .tracker import SpectralTracker

__all__ = ["spectrum", "edge_energy", "spectrum_of_system", "SpectrumResult", "SpectralTracker", "SpectrumConvergenceError",
           "IllConditionedSpectrumError",            "CoboundaryOperator", "DENSE_MAX", "TOL"]
