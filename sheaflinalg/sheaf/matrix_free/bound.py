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

A product of two values (``mul``, ``matmul``) has no bound over every state: its map from one factor is
the other factor (:meth:`~sheaflinalg.network.ops.tangent.Tangent.norm_at`).  Without a ``state`` its
``n_vu`` is ``inf`` (and so is the bound); given a state (every node's rows, samples of several states
stacked), its ``n_vu`` is the largest norm at those states' points: a bound there, not over a run whose
state leaves them (:func:`unbounded_nodes` names such nodes; heat and training read it at the states
they start from and say so).  A heat run on a graph with such nodes, or with normalisations (whose bound over
every state, ``1/sqrt(eps)``, is far above their bound at a typical state), reads their norms at every
step's state instead (:func:`state_dependent_nodes`, :mod:`sheaflinalg.dynamics.euler.adaptive`).
"""

import math

import numpy as np

from ...network.graph.nodes import INPUT
from ...network.ops.linear import spectral_norm
from ..skip_edges.encoding import DEFAULT_SKIP_ENCODING, is_split

__all__ = ["spectral_norm", "map_norm_bound", "block_norms", "graph_lambda_max_bound", "unbounded_nodes",
           "state_dependent_nodes"]


def unbounded_nodes(graph):
    """Names of the nodes whose maps have no bound over every state (products of two values), in order."""
    return [node.name for node in graph.nodes if math.isinf(node.rule.norm_bound(node, graph))]


def state_dependent_nodes(graph):
    """Names of the nodes whose map's norm a heat step reads at the state (their rule's ``state_bound``: products
    of two values, normalisations), in topological order."""
    return [node.name for node in graph.nodes if node.rule.state_bound]


def map_norm_bound(node, graph, state=None):
    """An upper bound on ``||F_(u->v)||_2`` of node ``v`` = ``node`` from each of its parents, for every pattern;
    for a node without one (``inf``) and a ``state`` (``{name: rows}``, the input ``x`` included), the largest
    over the state's samples of its bound there."""
    bound = node.rule.norm_bound(node, graph)
    if math.isinf(bound) and state is not None:
        rows = np.concatenate([state[p] for p in node.inputs], axis=1)
        bound = float(node.rule.norm_at(node, graph, rows).max(initial=0.0))
    return bound


def block_norms(graph, state=None, norms=None, skip_encoding=DEFAULT_SKIP_ENCODING):
    """``I + (n_vu)``: one row and column per node in topological order, then ``yhat`` (see the module);
    ``norms`` (``{name: n}``) replaces the bound of the nodes it names.  Under ``skip_encoding="edges"`` an
    ``add`` or ``concat`` node has one row per parent (its edge: 1 on the node, ``n_vu`` on that parent),
    the rows of the output edge last; the matrix is then tall."""
    names = [node.name for node in graph.nodes]
    at = {name: i for i, name in enumerate(names)}
    rows = []
    for node in graph.nodes:
        rows += [(node, [p]) for p in node.inputs] if is_split(node, skip_encoding) else [(node, node.inputs)]
    M = np.zeros((len(rows) + 1, len(names) + 1))
    for r, (node, parents) in enumerate(rows):
        n = norms[node.name] if norms and node.name in norms else map_norm_bound(node, graph, state)
        M[r, at[node.name]] = 1.0
        for parent in parents:
            if parent != INPUT:
                M[r, at[parent]] += n
    M[len(rows), [at[graph.output_node], len(names)]] += 1.0
    return M


def graph_lambda_max_bound(graph, gamma_max=0.0, reluctance=0.0, state=None, skip_encoding=DEFAULT_SKIP_ENCODING):
    """``||I + (n_vu)||_2^2 + gamma_max + reluctance``: a bound on ``lambda_max`` for every pattern.

    Parameters
    ----------
    graph : Graph
    gamma_max : float
        Largest soft-pin strength (added on the diagonal).
    reluctance : float
        Reluctance strength (added on the diagonal).
    state : dict, optional
        ``{name: (n_samples, size)}`` of every node and the input: where the maps of the products of two
        values are bounded (:func:`unbounded_nodes`); without it their bound, and this one, is ``inf``.

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
    M = block_norms(graph, state, skip_encoding=skip_encoding)
    if not np.all(np.isfinite(M)):
        return math.inf
    return float(np.linalg.norm(M, 2)) ** 2 + float(gamma_max) + float(reluctance)
