"""sheaflinalg: sparse linear algebra for neural networks as cellular sheaves.

Bosca & Ghrist's construction: a feedforward ReLU network is a cellular sheaf
whose restricted coboundary ``delta_Omega`` is block unit lower triangular;
the forward pass is its harmonic extension.

Subpackages, bottom to top (imports point down only): ``kernels`` (numba) and
``network``; ``sheaf``; ``dynamics``, ``training`` and ``spectral``; then
``tasks``, ``plotting`` and ``commands``.
"""

__version__ = "0.1.0"

# network
from ._common.memory import InsufficientMemoryError
from .network import Network, NetworkOverflowError
# sheaf
from .sheaf import (AugmentedSheafSystem, Block, HarmonicExtension, Layout, Reluctance, SheafSystem, SoftPins,
                    VerificationReport, assemble, harmonic_extension, verify)
# dynamics
from .dynamics import (Completion, HeatHistory, HeatResult, NonFiniteStateError, NonUniqueCompletionError,
                       complete, discord, heat, lambda_max_bound)
# training
from .training import DivergenceWarning, History, Regularization, TrainingInfo, TrainResult, sgd, train
# spectral
from .spectral import (IllConditionedSpectrumError, SpectralTracker, SpectrumConvergenceError, SpectrumResult,
                       spectrum, spectrum_of_system)
# the paper's tasks and recorded experiments
from . import tasks

__all__ = [
    "__version__",
    # network
    "Network", "NetworkOverflowError", "InsufficientMemoryError",
    # sheaf
    "Layout", "Block", "SheafSystem", "AugmentedSheafSystem", "assemble", "HarmonicExtension",
    "harmonic_extension", "VerificationReport", "verify", "SoftPins", "Reluctance",
    # dynamics
    "heat", "HeatResult", "HeatHistory", "NonFiniteStateError", "lambda_max_bound", "complete", "Completion",
    "NonUniqueCompletionError", "discord",
    # training
    "train", "sgd", "TrainResult", "History", "TrainingInfo", "Regularization", "DivergenceWarning",
    # spectral
    "spectrum", "spectrum_of_system", "SpectrumResult", "SpectralTracker", "SpectrumConvergenceError",
    "IllConditionedSpectrumError",
    # experiments
    "tasks",
]
