"""Equilibria of smooth graph networks at small nudging: Gauss-Newton and the loss's fixed point as one iteration.

When every pattern node of a graph is smooth (:data:`~sheaflinalg.network.ops.TANGENT`: GELU, SiLU, sigmoid,
normalisations, products, softmax; no rectifier, clamp or max-pool) the nudged equilibrium is the state
``x`` whose edge residuals are ``e = J(x)^T u`` with ``u = -b grad L(x_out)``: the backpropagation of the
loss's pull with the tangents at ``x`` itself, and ``x`` the forward pass that adds ``e`` to every node
(``x_v = f_v(x_parents) + e_v``).  The pattern iteration of :mod:`.graph` reaches it by solving the
linearised problem exactly at every linearisation point (each solve a fixed point of a few backward and
forward substitutions, :func:`~.loss_edge.fixed_point`) and moving the point to the solution; here both
fixed points are one map of the residuals, ``T(e) = J(x(e))^T u(x(e))`` (``x(e)`` the forward pass with
``e``): from ``e_0 = 0`` every step is one nonlinear forward pass with the last residuals (the state, its
tangents and its ``u``) and one backward substitution of ``u`` under those tangents, ``e_k = T(e_{k-1})``.
The first is backpropagation: ``e_1 = J(x_0)^T u_0`` at the forward pass ``x_0``.  ``T`` contracts by
``q = O(b)`` (the loss's pull is ``O(b)``, and so is the Gauss-Newton term it leaves out).

When to stop (:func:`settled`).  Two steps give the contraction, ``q ~ |e_k - e_{k-1}| / |e_{k-1} - e_{k-2}|``,
and with it the a-posteriori bound of a contraction on the error left, ``|e_k - e*| <= q / (1 - q) |e_k -
e_{k-1}|``.  The method has a bias of its own: the equilibrium's residuals ``e*`` are not backpropagation's
``e_1`` (they differ by ``O(b)`` relative, and so does ``g``: one-sided nudging's bias; symmetric nudging
cancels its first order and leaves ``O(b^2)``).  The iteration stops as soon as the bound is below
:func:`settling_tolerance`: :data:`~.settings.BIAS_SHARE` of that bias, measured on the sample itself
(``|e_k - e_1|``, one-sided; its square relative to ``|e_k|``, symmetric), never below the rounding of the
substitutions (:data:`~sheaflinalg.network.ops.tangent.SAME_POINT` relative).  Steps, bias and tolerance are
maxima over the residuals the gradient reads (the nodes with parameters: their velocity is their residual
times a function of the state), per sample.  Since ``q = O(b)`` the error
left is ``O(q)`` times the bias, of smaller order; the step that would only confirm it is not made.  At
``b = 1e-6`` that is 2 backward substitutions and 2 forward passes with tangents (one-sided; symmetric: 3
and 3), also on trained networks whose contraction is ``1e-4`` to ``1e-3`` (the previous rule, every point
and ``u`` to rounding, took a third step and a confirming forward pass there).

The result is ``(x_{k-1}, e_k)``: the state of the last forward pass and the residuals solved at its tangents
(what the envelope theorem's gradient takes).  ``e_k`` is within the tolerance of ``e*``; the state, the
forward pass of ``e_{k-1}``, is ``O(|e_k - e_{k-1}|)`` from the equilibrium's, which moves the gradient
``g = -velocity / b`` by ``O(b)`` times less than the same error in the residuals (the velocity is the
residuals, ``O(b)``, times functions of the state), so the forward pass of ``e_k`` is not made either.  At
the stop the force on the state, ``-(delta^T e + b grad L)``, is of the order of the last step (the residuals
solve ``delta^T e = u`` under the state's own tangents); the caller does not measure it (the tests' dense
twin checks the stop against the equilibrium solved to rounding).
Like :func:`~.loss_edge.fixed_point` it gives up (None: the caller takes the pattern iteration) when a
sample cannot converge within :data:`~.loss_edge.FIXED_POINT_STEPS` steps at the rate its last two show.
"""

import numpy as np

from ...kernels.equilibrium import row_maxima
from ...network.graph.forward import evaluate, node_steps
from ...network.ops.tangent import SAME_POINT
from ...network.graph.nodes import INPUT
from .loss_edge import FIXED_POINT_STEPS, gradient, out_of_reach, takes_fixed_point
from .settings import BIAS_SHARE


def takes_smooth_path(graph, nudging):
    """Whether :func:`smooth_equilibrium` is tried: a pattern node or more, all smooth, and a small nudging (a
    graph without pattern nodes has one frozen solve, its own fixed point, the same work)."""
    nodes = [graph.node(name) for name in graph.pattern_nodes]
    return takes_fixed_point(nudging, 0) and bool(nodes) and all(node.rule.smooth for node in nodes)


def smooth_equilibrium(graph, maps, X, Y, nudging, loss, symmetric=False):
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
    symmetric : bool, optional
        Whether the caller averages ``+b`` and ``-b`` (its bias is ``O(b^2)``: a tighter tolerance,
        :func:`settling_tolerance`).

    Returns
    -------
    values : dict
        ``{node: (M, size)}``: every node's value at the last forward pass (C-ordered, its arrays).
    edges : dict
        ``{node: (M, size)}``: every node's edge residual (its own array), solved under the tangents of
        ``values``: within :func:`settling_tolerance` of the equilibrium's.
    pattern : dict
        The linearisation points of ``values`` (their parents' values).
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
    floor = 4e-16 * abs(nudging) * (1.0 + np.abs(F).max(axis=1))     # the rounding of u's own gradient
    read = [node.name for node in graph.nodes if node.params] or [node.name for node in graph.nodes]
    first = previous = moved = None
    with np.errstate(all="ignore"):         # a diverging iteration is detected, not warned about
        for step in range(1, FIXED_POINT_STEPS + 1):
            e = pull_back(graph, maps, current.tangents, u)
            size, move, bias = _measure(e, previous, first, read)
            tolerance = settling_tolerance(bias, size, floor, symmetric)
            if np.all(settled(move, moved, tolerance)):
                return current.values, e, current.pattern, current.tangents, step
            if moved is not None and out_of_reach(move / tolerance, moved / tolerance, FIXED_POINT_STEPS - step):
                return None
            current = evaluate(graph, X, residuals=e, tangents=True, steps=steps, whole=True)
            u = -nudging * gradient(output, loss, current.values[graph.output_node], Y)
            first, previous, moved = e if first is None else first, e, move
    return None


def _measure(e, previous, first, read):
    """Per sample, the largest ``|e_v|``, ``|e_v - previous_v|`` and ``|e_v - first_v|`` (None without
    ``first``) over the nodes ``read``: those whose residuals the gradient reads (the nodes with parameters,
    whose velocity is their residual times a function of the state), every node in a graph without any."""
    size, move, bias, spare = (np.zeros(next(iter(e.values())).shape[0]) for _ in range(4))
    for name in read:
        a = e[name]
        row_maxima(a, a if previous is None else previous[name], size, move)
        if first is not None and first is not previous:
            row_maxima(a, first[name], spare, bias)
    if previous is None:
        return size, size, None
    return size, move, (move if first is previous else bias)


def settling_tolerance(bias, size, floor, symmetric=False):
    """Per sample, the error in the residuals the smooth iteration may leave (the module's rule).

    Parameters
    ----------
    bias : ndarray or None
        ``|e_k - e_1|`` per sample: the step from backpropagation's residuals, the one-sided nudging's bias in
        them (None before the second step: the rounding alone).
    size : ndarray
        ``|e_k|`` per sample.
    floor : ndarray
        The rounding of ``u`` per sample (absolute).
    symmetric : bool, optional
        The bias of symmetric nudging, ``bias^2 / size`` (its first order cancels).

    Returns
    -------
    ndarray
        :data:`~.settings.BIAS_SHARE` times the bias, at least the substitutions' rounding
        (:data:`~sheaflinalg.network.ops.tangent.SAME_POINT` relative to ``size``, and ``floor``).

    Examples
    --------
    >>> tolerance = settling_tolerance(np.array([1e-9, 0.0]), np.array([1e-6, 1e-6]), np.zeros(2))
    >>> [float(f"{t:.3g}") for t in tolerance]     # 1% of the bias; the rounding, 1e-12 of |e|
    [1e-11, 1e-18]
    >>> float(f"{settling_tolerance(np.array([1e-9]), np.array([1e-6]), np.zeros(1), symmetric=True)[0]:.3g}")
    1e-14
    """
    rounding = SAME_POINT * size + floor
    if bias is None:
        return rounding
    share = BIAS_SHARE * bias * (bias / np.maximum(size, np.finfo(float).tiny) if symmetric else 1.0)
    return np.maximum(rounding, share)


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


def settled(move, before, tolerance):
    """Per sample, whether the iterate is within ``tolerance`` of the fixed point: its step ``move`` is at
    most the tolerance, or, after two steps (``before``: the previous step), the contraction they show
    (``rate = move / before`` below 1/2) bounds the distance to the fixed point, ``rate / (1 - rate) * move``
    (the a-posteriori bound of a contraction: the step that would confirm it is saved).

    Examples
    --------
    >>> settled(np.array([0.5, 50.0, 50.0]), np.array([1e6, 1e6, 60.0]), np.ones(3)).tolist()
    [True, True, False]
    """
    if before is None:
        return move <= tolerance
    rate = move / before
    return (move <= tolerance) | ((rate < 0.5) & (rate / (1.0 - rate) * move <= tolerance))
