"""Training by the joint dynamics integrated adaptively: linearly implicit in the state, explicit in the weights.

``operator`` (the per-sample factorisation of ``I + c L_P``), ``ros2`` (the
adaptive Rosenbrock-W steps, with ReLU boundaries respected) and ``run`` (a
chain's run and its result).
"""

from .run import DEFAULTS, ImexResult, run_imex

__all__ = ["DEFAULTS", "ImexResult", "run_imex"]
