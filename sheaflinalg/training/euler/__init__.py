"""Training by the paper's joint state/weight dynamics, integrated by forward Euler.

``chain`` (compiled epochs of a chain, tiled over threads by ``tiled``), ``graph``
(graph networks), ``stagnation`` (the structural stagnation bound) and ``run``
(one run from validated data to its result).
"""

from .run import run_euler

__all__ = ["run_euler"]
