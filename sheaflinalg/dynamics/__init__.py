"""The sheaf heat equation with fixed weights: forward Euler (:mod:`.euler`), the exact event-driven
flow (:mod:`.exact`), the linearly implicit scheme of graph networks (:mod:`.implicit`), what they share
(:mod:`.problem`, :mod:`.result`), :func:`heat` (settings and dispatch), the convergence study
(:mod:`.study`).

May import ``sheaf``, ``network``, ``kernels`` and ``_common`` (not ``discord``, which stands beside
it).  ``complete`` lives in :mod:`sheaflinalg.sheaf.pins.completion`; it is re-exported here for
compatibility only.
"""

from ..sheaf.pins.completion import Completion, NonUniqueCompletionError, complete
from .euler.result import HeatHistory, HeatResult, NonFiniteStateError
from .exact.result import ExactHeatResult
from .heat import heat
from .implicit.run import ImplicitHeatResult
from .problem import lambda_max_bound
from .result import FlowResult
from .study import ConvergenceStudy, convergence_study, switch_statistics

__all__ = ["heat", "HeatResult", "HeatHistory", "NonFiniteStateError", "lambda_max_bound", "complete",
           "Completion", "NonUniqueCompletionError", "ExactHeatResult", "ImplicitHeatResult", "FlowResult",
           "ConvergenceStudy", "convergence_study", "switch_statistics"]
