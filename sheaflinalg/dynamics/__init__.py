"""The sheaf heat equation with fixed weights: Euler integration (a batch in parts, in threads) and
the exact event-driven flow.

May import ``sheaf``, ``network``, ``kernels`` and ``_common`` (not ``discord``, which stands beside
it).  ``complete`` lives in :mod:`sheaflinalg.sheaf.completion`; it is re-exported here for
compatibility only.
"""

from ..sheaf.completion import Completion, NonUniqueCompletionError, complete
from .heat import HeatHistory, HeatResult, NonFiniteStateError, heat, lambda_max_bound
from .exact_result import ExactHeatResult
from .exact_study import ConvergenceStudy, convergence_study, switch_statistics

__all__ = ["heat", "HeatResult", "HeatHistory", "NonFiniteStateError", "lambda_max_bound", "complete",
           "Completion", "NonUniqueCompletionError", "ExactHeatResult", "ConvergenceStudy",
           "convergence_study", "switch_statistics"]
