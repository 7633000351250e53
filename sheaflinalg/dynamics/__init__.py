"""The sheaf heat equation with fixed weights: Euler integration (a batch in parts, in threads),
completion of partially clamped networks, and per-edge discord.

May import ``sheaf``, ``network``, ``kernels`` and ``_common``.
"""

from . import discord
from .clamping import Completion, NonUniqueCompletionError, complete
from .heat import HeatHistory, HeatResult, NonFiniteStateError, heat, lambda_max_bound
from .exact_result import ExactHeatResult
from .exact_study import ConvergenceStudy, convergence_study, switch_statistics

__all__ = ["heat", "HeatResult", "HeatHistory", "NonFiniteStateError", "lambda_max_bound", "complete",
           "Completion", "NonUniqueCompletionError", "discord", "ExactHeatResult", "ConvergenceStudy",
           "convergence_study", "switch_statistics"]
