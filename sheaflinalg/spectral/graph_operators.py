"""``L[Omega, Omega]`` of one sample of a graph network as an operator: node-by-node products and substitutions.

``L v = delta^T (delta v)`` is one pass in topological order (the restriction
maps) and one in reverse (their transposes); ``L^{-1} v = delta^{-1}
(delta^{-T} v)`` is a backward then a forward block substitution
(:class:`~sheaflinalg.sheaf.matrix_free.GraphCoboundary`, a batch of one
sample).  No matrix is formed: the cost of either product is about two
forward passes of the network.  When ARPACK asks for both products in one
step (:func:`sheaflinalg.spectral.arpack_pair.largest_pair`), they run in two
threads (the convolution kernels and BLAS release the GIL); each is computed
exactly as alone, so the results do not depend on the thread count.
"""

import threading

import numpy as np

from .._common import threads as _threads
from ..sheaf.matrix_free import GraphCoboundary


class GraphLaplacianOperator:
    """``L = delta^T delta`` and ``L^{-1}`` of one sample of a graph network under a frozen pattern.

    Parameters
    ----------
    graph : Graph
    pattern : dict
        ``{node: (1, size) array}``: this sample's rows of a validated pattern.
    jacobian : ndarray, shape (n_out, n_out), optional
        ``J_phi`` of the output edge (the ``"free"`` system); None for the reduced system.
    maps : NodeMaps, optional
        The graph's restriction maps, shared by the operators of several samples.
    threads : int
        With 2 or more, a step that asks for both products computes them in two threads (when the
        cores that other runnable tasks leave free allow it).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> pool = sl.Node("p", "maxpool", ["x"], {"kernel_size": 2, "stride": 2, "padding": 0, "dilation": 1})
    >>> flat = sl.Node("flat", "reshape", ["p"], {"shape": (2,)})
    >>> fc = sl.Node("fc", "linear", ["flat"], params={"weight": np.array([[1.0, -1.0]]), "bias": np.zeros(1)})
    >>> net = sl.Network.from_nodes((1, 4), [pool, flat, fc])
    >>> op = GraphLaplacianOperator(net.graph, net.evaluate(np.array([[1.0, -2.0, 3.0, 0.5]])).pattern)
    >>> v = np.arange(op.n, dtype=float)
    >>> bool(np.allclose(op.laplacian_solve(op.laplacian_matvec(v)), v))
    True
    """

    def __init__(self, graph, pattern, jacobian=None, maps=None, threads=1):
        self.threads = threads
        self._delta = GraphCoboundary(graph, pattern, None if jacobian is None else jacobian[None], maps)
        self.layout = self._delta.layout
        self.n = self.layout.n_free
        self.n_matvec = 0
        self.n_solve = 0

    def apply_pair(self, a, b):
        """``y = L x`` for request ``a = (x, y)`` and ``y = L^{-1} x`` for request ``b`` (either may be None).

        The protocol of :func:`sheaflinalg.spectral.arpack_pair.largest_pair`; ``x`` and ``y`` are
        float64 vectors of length ``n``.
        """
        if a is not None and b is not None and self.threads > 1 and _threads.usable_threads(2) > 1:
            other = threading.Thread(target=self._matvec, args=a)
            other.start()
            try:
                self._solve(*b)
            finally:
                other.join()
            return
        if a is not None:
            self._matvec(*a)
        if b is not None:
            self._solve(*b)

    def _matvec(self, x, y):
        self.n_matvec += 1
        y[:] = self._delta.apply_transpose(self._delta.apply(self._row(x)))[0]

    def _solve(self, x, y):
        self.n_solve += 1
        y[:] = self._delta.solve(self._delta.solve_transpose(self._row(x)))[0]

    def _row(self, v):
        v = np.asarray(v, dtype=np.float64)
        if v.size != self.n:
            raise ValueError(f"expected a vector of length {self.n}, got {v.size}")
        return v.reshape(1, self.n)

    def laplacian_matvec(self, v):
        """``delta^T (delta v)``."""
        out = np.empty(self.n)
        self.apply_pair((v, out), None)
        return out

    def laplacian_solve(self, v):
        """``L^{-1} v = delta^{-1} (delta^{-T} v)`` (two block substitutions)."""
        out = np.empty(self.n)
        self.apply_pair(None, (v, out))
        return out
