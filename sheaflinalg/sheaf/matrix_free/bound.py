"""A bound on ``lambda_max(delta_P^T delta_P)`` of a graph network valid for every activation pattern.

``delta_P`` on the free nodes (and ``yhat``) has the identity on its block
diagonal and ``-F_(u->v)`` in block row ``v``, block column ``u`` for every
non-input parent ``u`` of ``v``; the output edge adds ``yhat - J z_out``.  For
any block matrix ``||A||_2 <= ||M||_2`` where ``M[v, u] = ||A_vu||_2`` (apply
Cauchy-Schwarz block row by block row), so with ``n_vu`` an upper bound on
``||F_(u->v)||_2`` over EVERY pattern,

``lambda_max <= ||I + (n_vu)||_2^2 + max gamma + lambda``

(a small dense matrix of one row and column per node).  Each op's rule gives its map's bound (:meth:`~sheaflinalg.network.ops.OpRule.norm_bound`, e.g. ``||W||_2``
for linear, the largest frequency response of a convolution, the window count of a max-pool
selection); the output Jacobian's is 1 (identity, sigmoid, tanh, softmax).

Hard pins take principal submatrices (only lowering ``lambda_max``); the reduced
system drops the output edge and ``yhat`` (a submatrix again), so one bound
serves both.
"""

import numpy as np

from ...network.graph.nodes import INPUT
from ...network.ops.linear import spectral_norm

__all__ = ["spectral_norm", "map_norm_bound", "block_norms", "graph_lambda_max_bound"]


def map_norm_bound(node, graph):
    """An upper bound on ``||F_(u->v)||_2`` of node ``v`` = ``node`` from each of its parents, for every pattern."""
    return node.rule.norm_bound(node, graph)


def block_norms(graph):
    """``I + (n_vu)``: one row and column per node in topological order, then ``yhat`` (see the module)."""
    names = [node.name for node in graph.nodes]
    at = {name: i for i, name in enumerate(names)}
    M = np.eye(len(names) + 1)
    for node in graph.nodes:
        n = map_norm_bound(node, graph)
        for parent in node.inputs:
            if parent != INPUT:
                M[at[node.name], at[parent]] += n
    M[len(names), at[graph.output_node]] += 1.0
    return M


def graph_lambda_max_bound(graph, gamma_max=0.0, reluctance=0.0):
    """``||I + (n_vu)||_2^2 + gamma_max + reluctance``: a bound on ``lambda_max`` for every pattern.

    Parameters
    ----------
    graph : Graph
    gamma_max : float
        Largest soft-pin strength (added on the diagonal).
    reluctance : float
        Reluctance strength (added on the diagonal).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> fc = sl.Node("fc", "linear", ["x"], params={"weight": np.array([[3.0, 4.0]]), "bias": np.zeros(1)})
    >>> net = sl.Network.from_nodes((2,), [fc, sl.Node("r", "relu", ["fc"])])
    >>> block_norms(net.graph)             # rows and columns: fc, r, yhat; ||F_(fc->r)|| <= 1
    array([[1., 0., 0.],
           [1., 1., 0.],
           [0., 1., 1.]])
    >>> round(graph_lambda_max_bound(net.graph), 6)
    3.24698
    """
    return float(np.linalg.norm(block_norms(graph), 2)) ** 2 + float(gamma_max) + float(reluctance)
