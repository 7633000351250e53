"""``L[Omega, Omega]`` of a group of samples of a graph network as an operator: node-by-node products and substitutions.

``L v = delta^T (delta v)`` is one pass in topological order (the restriction
maps) and one in reverse (their transposes); ``L^{-1} v = delta^{-1}
(delta^{-T} v)`` is a backward then a forward block substitution
(:class:`~sheaflinalg.sheaf.matrix_free.coboundary.GraphCoboundary`).  No matrix is
formed: either product costs about two forward passes of the network.

The operator serves a group of samples (each with its own pattern), whose
ARPACK problems advance in lockstep
(:func:`sheaflinalg.spectral.arpack_pair.largest_pairs`): the products asked
for in one step are stacked into one batch, so that the per-node work of a
pass (Python, kernel calls) is shared by the group.  The products with ``L``
and with ``L^{-1}`` of a step run in two threads when both are asked for (the
kernels and BLAS release the GIL); each is computed as it would be alone, so
the results do not depend on the thread count.
"""

import copy
import threading

import numpy as np

from ..._common import threads as _threads
from ...sheaf.matrix_free.coboundary import GraphCoboundary


class GraphLaplacianOperator:
    """``L = delta^T delta`` and ``L^{-1}`` of a group of samples of a graph network under frozen patterns.

    Parameters
    ----------
    graph : Graph
    pattern : dict
        ``{node: (G, size) array}``: the group's rows of a validated pattern.
    jacobians : ndarray, shape (G, n_out) or (G, n_out, n_out), optional
        ``J_phi`` of the output edge (the ``"free"`` system), by its diagonal (an elementwise output) or
        dense (softmax); None for the reduced system.
    maps : NodeMaps, optional
        The graph's restriction maps, shared by several operators.
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

    def __init__(self, graph, pattern, jacobians=None, maps=None, threads=1):
        self.threads = threads
        self._delta = GraphCoboundary(graph, pattern, jacobians, maps)
        # the group's size (a graph without pattern nodes has one Laplacian: a group of one)
        self.size = len(jacobians) if jacobians is not None else next((v.shape[0] for v in pattern.values()), 1)
        self.layout = self._delta.layout
        self.n = self.layout.n_free
        self.n_matvec = 0
        self.n_solve = 0

    def apply_batch(self, a, b):
        """``y = L_u x`` for every request ``(u, x, y)`` of ``a``, ``y = L_u^{-1} x`` for those of ``b``.

        The protocol of :func:`sheaflinalg.spectral.arpack_pair.largest_pairs`; ``u`` is the row of
        the group, ``x`` and ``y`` float64 vectors of length ``n``.
        """
        if a and b and self.threads > 1 and _threads.usable_threads(2) > 1:
            other = threading.Thread(target=self._products, args=(a, False))
            other.start()
            try:
                self._products(b, True)
            finally:
                other.join()
            return
        # one kind of product: the nodes of each pass of L shared by the threads
        self._products(a, False, self.threads)
        self._products(b, True)

    def _products(self, requests, inverse, threads=1):
        if not requests:
            return
        delta = self._rows([u for u, _, _ in requests])
        # one request (one sample, or the other end converged): its vector as a row, not a copy
        W = (self._vector(requests[0][1])[None, :] if len(requests) == 1
             else np.stack([self._vector(x) for _, x, _ in requests]))
        if inverse:
            out = delta.solve(delta.solve_transpose(W))
        else:
            only = delta.support(W)          # a vector on a few nodes (windows): their edges alone
            out = delta.apply_transpose(delta.apply(W, threads, only), threads, only)
        for (_, _, y), row in zip(requests, out):
            y[:] = row
        if inverse:
            self.n_solve += len(requests)
        else:
            self.n_matvec += len(requests)

    def _rows(self, rows):
        """The coboundary of the group's rows ``rows`` (the operator's own when it is all of them)."""
        if rows == list(range(self.size)):
            return self._delta
        view = copy.copy(self._delta)
        view.pattern = {name: value[rows] for name, value in self._delta.pattern.items()}
        if view.jacobians is not None:
            view.jacobians = view.jacobians[rows]
        return view

    def _vector(self, v):
        v = np.asarray(v, dtype=np.float64).reshape(-1)
        if v.size != self.n:
            raise ValueError(f"expected a vector of length {self.n}, got {v.size}")
        return v

    def single(self, u):
        """``(apply_L, apply_Linv)`` of the group's row ``u``, one vector in, one out."""
        def apply(v, inverse):
            out = np.empty(self.n)
            self._products([(u, v, out)], inverse)
            return out
        return (lambda v: apply(v, False)), (lambda v: apply(v, True))

    def laplacian_matvec(self, v, u=0):
        """``delta^T (delta v)`` for the group's row ``u``."""
        return self.single(u)[0](v)

    def laplacian_solve(self, v, u=0):
        """``L^{-1} v = delta^{-1} (delta^{-T} v)`` (two block substitutions) for the group's row ``u``."""
        return self.single(u)[1](v)
