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
the state is then the equilibrium the pattern iteration settles on, to the same rounding.  There the force on
the state vanishes: the residuals are ``e = delta^{-T} u`` under the state's own tangents, so ``delta^T e = u``
on the output node and 0 elsewhere, and the force ``-delta^T e - b grad L`` is ``-(u + b grad L) = 0``; its
departure is bounded by the same tolerances, so the caller does not measure the force again (a backward pass
that cost as much as the whole iteration's forward passes; the tests' dense twin measures it).  At ``b = 1e-6``
the second step moves the state by ``~1e-12`` at a rate ``~1e-6``: 2 steps, each a backward substitution
and a forward pass (the pattern iteration: 2 or 3 frozen solves of 3 backward and forward substitutions
each).
Like :func:`~.loss_edge.fixed_point` it gives up (None: the caller takes the pattern iteration) when a
sample cannot converge within :data:`~.loss_edge.FIXED_POINT_STEPS` steps at the rate its last two show.
"""

import numpy as np

from ...network.graph.forward import evaluate, node_steps
from ...network.ops.tangent import point_excess
from ...network.graph.nodes import INPUT
from .loss_edge import FIXED_POINT_STEPS, coefficient_excess, gradient, out_of_reach, takes_fixed_point


def takes_smooth_path(graph, nudging):
    """Whether :func:`smooth_equilibrium` is tried: a pattern node or more, all smooth, and a small nudging (a
    graph without pattern nodes has one frozen solve, its own fixed point, the same work)."""
    nodes = [graph.node(name) for name in graph.pattern_nodes]
    return takes_fixed_point(nudging, 0) and bool(nodes) and all(node.rule.smooth for node in nodes)


def smooth_equilibrium(graph, maps, X, Y, nudging, loss):
    """``(values, edges, pattern, tangents, steps)`` of the nudged equilibria of a batch of a smooth graph (the
    module), or None.

    Parameters
    ----------
    graph : Graph
        Every pattern node smooth (:func:`takes_smooth_path`).
    maps : NodeMaps
    X, Y : ndarray
        ``(M, n_in)`` inputs and ``(M, n_out)`` targets.
    nudging : float
        ``b`` (small: :func:`~.loss_edge.takes_fixed_point`).
    loss : str

    Returns
    -------
    values : dict
        ``{node: (M, size)}``: every node's value (C-ordered, the forward pass's arrays).
    edges : dict
        ``{node: (M, size)}``: every node's edge residual (its own array): the state is ``values``'
        forward pass with them added.
    pattern : dict
        The linearisation points of the state (its parents' values: the fixed point's up to the tolerance).
    tangents : dict
        ``{node: Linearisation}``: the smooth nodes' tangents there (made with the forward pass's values).
    steps : int
        Backward substitutions made.
    None
        When some sample does not converge (see the module).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> from sheaflinalg.sheaf.matrix_free.node_maps import NodeMaps
    >>> fc = sl.Node("fc", "linear", ["x"], params={"weight": np.eye(2), "bias": np.zeros(2)})
    >>> net = sl.Network.from_nodes((2,), [fc, sl.Node("g", "gelu", ["fc"], {"approximate": "none"})],
    ...                             output="softmax")
    >>> graph = net.graph
    >>> values, edges, _, _, steps = smooth_equilibrium(graph, NodeMaps(graph), np.array([[1.0, -1.0]]),
    ...                                                 np.array([[0.0, 1.0]]), 1e-6, "cross_entropy")
    >>> steps, values["g"].shape, edges["fc"].shape
    (2, (1, 2), (1, 2))
    """
    output, steps = graph.output, node_steps(graph, tangents=True)       # the steps made once for every pass
    current = evaluate(graph, X, tangents=True, steps=steps, whole=True)
    F = current.values[graph.output_node]
    u = -nudging * gradient(output, loss, F, Y)
    moved = None
    with np.errstate(all="ignore"):         # a diverging iteration is detected, not warned about
        for step in range(1, FIXED_POINT_STEPS + 1):
            e = pull_back(graph, maps, current.tangents, u)
            new = evaluate(graph, X, residuals=e, tangents=True, steps=steps, whole=True)
            u_new = -nudging * gradient(output, loss, new.values[graph.output_node], Y)
            excess = np.maximum(coefficient_excess(u_new, u, F, nudging),
                                np.max([point_excess(new.pattern[name], current.pattern[name])
                                        for name in graph.pattern_nodes], axis=0, initial=0.0))
            if np.all(converged(excess, moved)):
                return {node.name: new.values[node.name] for node in graph.nodes}, e, new.pattern, new.tangents, step
            if moved is not None and out_of_reach(excess, moved, FIXED_POINT_STEPS - step):
                return None
            current, u, moved = new, u_new, excess
    return None


def pull_back(graph, maps, tangents, u):
    """``{node: e_v}``: the edge residuals ``delta_Omega^{-T}`` of the pull ``u`` on the output node, by
    backward substitution under ``tangents`` (``{node: Linearisation}``, or pattern rows: each node's
    linearisation then made once), one array per node.

    Every node's residual is its own array (the children's transposed products added in reverse
    topological order, then the output node's ``u``: the sums of
    :meth:`~sheaflinalg.sheaf.matrix_free.coboundary.GraphCoboundary.solve_transpose`, in its order).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> from sheaflinalg.sheaf.matrix_free.node_maps import NodeMaps
    >>> fc = sl.Node("fc", "linear", ["x"], params={"weight": np.eye(2), "bias": np.zeros(2)})
    >>> graph = sl.Network.from_nodes((2,), [fc, sl.Node("s", "sigmoid", ["fc"])], output="softmax").graph
    >>> e = pull_back(graph, NodeMaps(graph), {"s": np.zeros((1, 2))}, np.array([[4.0, -4.0]]))
    >>> e["s"].tolist(), e["fc"].tolist()        # sigmoid'(0) = 1/4
    ([[4.0, -4.0]], [[1.0, -1.0]])
    """
    prepared = {name: maps.prepare(name, rows) for name, rows in tangents.items()}
    pulled, e = {}, {}
    for node in reversed(graph.nodes):
        ev = pulled.pop(node.name, None)
        if node.name == graph.output_node:
            ev = u.copy() if ev is None else ev + u
        e[node.name] = np.zeros((u.shape[0], graph.sizes[node.name])) if ev is None else ev
        for i, parent in enumerate(node.inputs):
            if parent == INPUT:
                continue
            part = maps.transpose(node.name, i, e[node.name], prepared.get(node.name))
            if parent in pulled:
                pulled[parent] += part
            else:       # owned: a map may return a view of its argument
                pulled[parent] = part if _owned(part, e[node.name]) else np.array(part)
    return e


def _owned(part, argument):
    """Whether a transposed product can be added to in place (its own writable C-ordered array)."""
    return part.flags.writeable and part.flags.c_contiguous and not np.may_share_memory(part, argument)


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
