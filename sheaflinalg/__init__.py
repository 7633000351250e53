"""sheaflinalg: sparse linear algebra for neural networks as cellular sheaves.

Bosca & Ghrist's construction: a feedforward ReLU network is a cellular sheaf
whose restricted coboundary ``delta_Omega`` is block unit lower triangular;
the forward pass is its harmonic extension.

Subpackages, bottom to top (imports point down only): ``kernels`` (numba) and
``network``; ``sheaf``; ``dynamics``, ``discord``, ``training`` and ``spectral``; then
``tasks``, ``plotting`` and ``commands``.
"""

from ._common.version import VERSION as __version__  # noqa: E402 (first, before the layers)

# threads (one policy for the whole package)
from ._common.threads import get_num_threads, num_threads, process_pool, set_num_threads
# network
from ._common.memory import InsufficientMemoryError
from .network import (Graph, GraphNetworkError, ImportMismatchError, Network, NetworkOverflowError, Node,
                      UnsupportedModelError)
# sheaf
from .sheaf import (AugmentedSheafSystem, Block, Completion, HarmonicExtension, Layout, NonUniqueCompletionError,
                    Reluctance, SheafSystem, SoftPins, VerificationReport, assemble, complete, harmonic_extension,
                    verify)
# dynamics
from .dynamics import (ConvergenceStudy, ExactHeatResult, FlowResult, HeatHistory, HeatResult,
                       ImplicitHeatResult, NonFiniteStateError, convergence_study, heat, lambda_max_bound, switch_statistics)
# discord (sl.discord.residuals, sl.discord.pinned, ...)
from . import discord
# training
from .training import (DivergenceWarning, History, Regularization, TrainingInfo, TrainResult, UnsettledWarning, sgd,
                       train)
from .training import optim  # sl.optim.AdamW, sl.optim.Cosine, ...
# spectral
from .spectral import (IllConditionedSpectrumError, SpectralTracker, SpectrumConvergenceError, SpectrumResult,
                       spectrum, spectrum_of_system)
# the paper's tasks and recorded experiments
from . import tasks
# parameter sweeps, and surveys of a data set
from . import sweep
from .sweep.survey import survey
from .sweep.survey_result import SurveyResult

__all__ = [
    "__version__",
    # threads
    "set_num_threads", "get_num_threads", "num_threads", "process_pool",
    # network
    "Network", "NetworkOverflowError", "UnsupportedModelError", "ImportMismatchError", "InsufficientMemoryError", "Graph", "Node", "GraphNetworkError",
    # sheaf
    "Layout", "Block", "SheafSystem", "AugmentedSheafSystem", "assemble", "HarmonicExtension",
    "harmonic_extension", "VerificationReport", "verify", "SoftPins", "Reluctance", "complete", "Completion",
    "NonUniqueCompletionError",
    # dynamics
    "heat", "HeatResult", "HeatHistory", "NonFiniteStateError", "lambda_max_bound", "ExactHeatResult",
    "ImplicitHeatResult", "FlowResult", "convergence_study", "ConvergenceStudy", "switch_statistics",
    # discord
    "discord",
    # training
    "train", "sgd", "TrainResult", "History", "TrainingInfo", "Regularization", "DivergenceWarning", "UnsettledWarning", "optim",
    # spectral
    "spectrum", "spectrum_of_system", "SpectrumResult", "SpectralTracker", "SpectrumConvergenceError",
    "IllConditionedSpectrumError",
    # experiments and sweeps
    "tasks", "sweep", "survey", "SurveyResult",
]
