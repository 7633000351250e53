"""sheaflinalg: sparse linear algebra for neural networks as cellular sheaves.

Bosca & Ghrist's construction: a feedforward ReLU network is a cellular sheaf
whose restricted coboundary ``delta_Omega`` is block unit lower triangular;
the forward pass is its harmonic extension.
"""

from .assembly import SheafSystem, assemble
from .harmonic import HarmonicExtension, harmonic_extension
from .layout import Block, Layout
from .network import Network
from .verify import VerificationReport, verify
from .assembly import AugmentedSheafSystem
from .dynamics import HeatHistory, HeatResult, NonFiniteStateError, heat, lambda_max_bound
from .pins import Reluctance, SoftPins
from .clamping import Completion, NonUniqueCompletionError, complete
from . import discord
from . import tasks
from .baseline import sgd
from .history import DivergenceWarning, History, Regularization, TrainingInfo
from .training import TrainResult, train

__version__ = "0.1.0"

__all__ = ["Network", "Layout", "Block", "SheafSystem", "assemble", "HarmonicExtension",
           "harmonic_extension", "VerificationReport", "verify", "__version__"]
__all__ += ["train", "sgd", "tasks", "TrainResult", "History", "TrainingInfo", "Regularization",
            "DivergenceWarning"]
__all__ += ["AugmentedSheafSystem", "heat", "HeatResult", "HeatHistory", "NonFiniteStateError",
            "lambda_max_bound", "SoftPins", "Reluctance", "discord", "complete", "Completion",
            "NonUniqueCompletionError"]
from .spectral import SpectralTracker, SpectrumConvergenceError, SpectrumResult, spectrum, spectrum_of_system
__all__ += ["spectrum", "spectrum_of_system", "SpectrumResult", "SpectralTracker", "SpectrumConvergenceError"]
