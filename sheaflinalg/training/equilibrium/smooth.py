"""Equilibria of smooth graph networks at small nudging: Gauss-Newton and the loss's fixed point as one iteration.

When every pattern node of a graph is smooth (:data:`~sheaflinalg.network.ops.TANGENT`: GELU, SiLU, sigmoid,
normalisations, products, softmax; no rectifier, clamp or max-pool) the nudged equilibrium is the state
``x`` whose edge residuals are ``e = J(x)^T u`` with ``u = -b grad L(x_out)``: the backpropagation of the
loss's pull with the tangents at ``x`` itself, and ``x`` the forward pass that adds ``e`` to every node
(``x_v = f_v(x_parents) + e_v``).  The pattern iteration of :mod:`.graph` reaches it by solving the
linearised problem exactly at every linearisation point (each solve a fixed point of a few backward and
forward substitutions, :func:`~.loss_edge.fixed_point`) and moving the point to the solution; here both
fixed points are one: from the forward pass, every step is one backward substitution of ``u`` under the
tangents at the current state and one nonlinear forward pass with its residuals, which gives the next
state, its tangents and its ``u``.  At nudging ``b`` every step moves the state ``O(b)`` times less (the
loss's pull is ``O(b)``, and so is the Gauss-Newton term it leaves out).

It stops when the state is within the tolerances of the fixed point: every linearisation point within
:data:`~sheaflinalg.network.ops.tangent.SAME_POINT` relative (each node's :meth:`same_pattern`, the pattern
iteration's criterion) and ``u`` within its rounding (:func:`~.loss_edge.coefficient_excess`, the fixed
point's), by its last step or by the bound the contraction of its last two steps gives (:func:`converged`):
the state is then the equilibrium the pattern iteration settles on, to the same rounding.  At ``b = 1e-6``
the second step moves the state by ``~1e-12`` at a rate ``~1e-6``: 2 steps, each a backward substitution
and a forward pass (the pattern iteration: 2 or 3 frozen solves of 3 backward and forward substitutions
each).
Like :func:`~.loss_edge.fixed_point` it gives up (None: the caller takes the pattern iteration) when a
sample cannot converge within :data:`~.loss_edge.FIXED_POINT_STEPS` steps at the rate its last two show.
"""

import numpy as np

from ...network.graph.forward import evaluate
from ...network.ops.tangent import point_excess
from ...sheaf.matrix_free.coboundary import GraphCoboundary
from ...sheaf.matrix_free.switching import node_values
from .loss_edge import FIXED_POINT_STEPS, coefficient_excess, gradient, out_of_reach, takes_fixed_point


def takes_smooth_path(graph, nudging):
    """Whether :func:`smooth_equilibrium` is tried: a pattern node or more, all smooth, and a small nudging (a
    graph without pattern nodes has one frozen solve, its own fixed point, the same work)."""
    nodes = [graph.node(name) for name in graph.pattern_nodes]
    return takes_fixed_point(nudging, 0) and bool(nodes) and all(node.rule.smooth for node in nodes)


def smooth_equilibrium(graph, maps, layout, X, Y, nudging, loss):
    """``(state, pattern, steps)`` of the nudged equilibria of a batch of a smooth graph (the module), or None.

    Parameters
    ----------
    graph : Graph
        Every pattern node smooth (:func:`takes_smooth_path`).
    maps : NodeMaps
    layout : Layout
        The graph's reduced layout.
    X, Y : ndarray
        ``(M, n_in)`` inputs and ``(M, n_out)`` targets.
    nudging : float
        ``b`` (small: :func:`~.loss_edge.takes_fixed_point`).
    loss : str

    Returns
    -------
    state : ndarray, shape (M, 2 n_free)
        The free cochains, then the edge residuals (same offsets), as :mod:`.graph`'s frozen solves return them.
    pattern : dict
        The linearisation points of the state (its parents' values: the fixed point's up to the tolerance).
    steps : int
        Backward substitutions made.
    None
        When some sample does not converge (see the module).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> from sheaflinalg.sheaf.layout import Layout
    >>> from sheaflinalg.sheaf.matrix_free.node_maps import NodeMaps
    >>> fc = sl.Node("fc", "linear", ["x"], params={"weight": np.eye(2), "bias": np.zeros(2)})
    >>> net = sl.Network.from_nodes((2,), [fc, sl.Node("g", "gelu", ["fc"], {"approximate": "none"})],
    ...                             output="softmax")
    >>> graph = net.graph
    >>> state, _, steps = smooth_equilibrium(graph, NodeMaps(graph), Layout.from_graph(graph, reduced=True),
    ...                                      np.array([[1.0, -1.0]]), np.array([[0.0, 1.0]]), 1e-6, "cross_entropy")
    >>> steps, state.shape
    (2, (1, 8))
    """
    M, output = X.shape[0], graph.output
    out = layout.free(graph.output_node)
    current = evaluate(graph, X)
    F = current.values[graph.output_node]
    u = -nudging * gradient(output, loss, F, Y)
    seeds = np.zeros((M, layout.n_free))
    moved = None
    with np.errstate(all="ignore"):         # a diverging iteration is detected, not warned about
        for step in range(1, FIXED_POINT_STEPS + 1):
            seeds[:, out] = u
            e = GraphCoboundary(graph, current.pattern, maps=maps, layout=layout).solve_transpose(seeds)
            new = evaluate(graph, X, residuals=node_values(graph, layout, e))
            u_new = -nudging * gradient(output, loss, new.values[graph.output_node], Y)
            excess = np.maximum(coefficient_excess(u_new, u, F, nudging),
                                np.max([point_excess(new.pattern[name], current.pattern[name])
                                        for name in graph.pattern_nodes], axis=0, initial=0.0))
            if np.all(converged(excess, moved)):
                w = np.concatenate([new.values[node.name] for node in graph.nodes], axis=1)
                return np.concatenate([w, e], axis=1), new.pattern, step
            if moved is not None and out_of_reach(excess, moved, FIXED_POINT_STEPS - step):
                return None
            current, u, moved = new, u_new, excess
    return None


def converged(excess, before):
    """Per sample, whether the iterate is within the tolerance of the fixed point: its step ``excess`` (in units
    of the tolerance) is at most 1, or, after two steps (``before``: the previous step's), the contraction
    they show (``rate = excess / before`` below 1/2) bounds the distance to the fixed point,
    ``rate / (1 - rate) * excess``, by 1 (the a-posteriori bound of a contraction: the step that would
    confirm it is saved).

    Examples
    --------
    >>> converged(np.array([0.5, 50.0, 50.0]), np.array([1e6, 1e6, 60.0])).tolist()
    [True, True, False]
    """
    if before is None:
        return excess <= 1.0
    rate = excess / before
    return (excess <= 1.0) | ((rate < 0.5) & (rate / (1.0 - rate) * excess <= 1.0))
