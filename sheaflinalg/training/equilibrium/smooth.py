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
the state is then the equilibrium the pattern iteration settles on, to the same rounding.  The criterion is
per sample, and so is the iteration: a sample that has settled keeps its state while the others take more
steps, which run on those samples alone (each sample's equilibrium is the one it reaches alone; a trained ViT's
batch of 100 settles 96-99 samples in 2 steps, the rest in 3).  At ``b = 1e-6``
the second step moves the state by ``~1e-12`` at a rate ``~1e-6``: 2 steps, each a backward substitution
and a forward pass (the pattern iteration: 2 or 3 frozen solves of 3 backward and forward substitutions
each).
Like :func:`~.loss_edge.fixed_point` it gives up (None: the caller takes the pattern iteration) when a
sample cannot converge within :data:`~.loss_edge.FIXED_POINT_STEPS` steps at the rate its last two show.
"""

import numpy as np

from ...network.graph.forward import evaluate, node_steps
from ...network.ops.tangent import Rows, point_excess
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
    run = _Settling(graph, X, Y, nudging, loss)
    current, moved = run.forward(run.rows), None
    u = run.coefficients(current, run.rows)
    with np.errstate(all="ignore"):         # a diverging iteration is detected, not warned about
        for step in range(1, FIXED_POINT_STEPS + 1):
            e = pull_back(graph, maps, current.tangents, u)
            if run.kept is not None:        # the pull under the last state's tangents, on the samples still moving
                e, u, current = ({k: v[run.kept] for k, v in e.items()}, u[run.kept],
                                 _Points({k: v[run.kept] for k, v in current.pattern.items()}))
            new = run.forward(run.rows, e)
            u_new = run.coefficients(new, run.rows)
            excess = np.maximum(coefficient_excess(u_new, u, run.F[run.rows], nudging),
                                np.max([point_excess(new.pattern[name], current.pattern[name])
                                        for name in graph.pattern_nodes], axis=0, initial=0.0))
            done = converged(excess, moved)
            run.keep(new, e, done)
            if np.all(done):
                return run.values, run.edges, run.pattern, run.tangents, step
            if moved is not None and out_of_reach(excess, moved, FIXED_POINT_STEPS - step):
                return None
            current, u, moved = new, u_new, excess[~done]
    return None


class _Points:
    """The linearisation points of the samples still moving (what the next step's excess compares with)."""

    def __init__(self, pattern):
        self.pattern = pattern


class _Settling:
    """The passes of :func:`smooth_equilibrium` and its result, assembled as samples settle: a step after the
    first that leaves some samples unsettled makes its forward pass on those alone (``rows``); the
    settled samples keep their state (written into the arrays of the state they settled at, a batch's rows
    being independent) and their tangents (:class:`~sheaflinalg.network.ops.tangent.Rows`)."""

    def __init__(self, graph, X, Y, nudging, loss):
        self.graph, self.X, self.Y, self.nudging, self.loss = graph, X, Y, nudging, loss
        self.steps = node_steps(graph, tangents=True)       # made once for every pass
        self.rows, self.kept, self.F = np.arange(X.shape[0]), None, None
        self.values = self.edges = self.pattern = self.tangents = None

    def forward(self, rows, e=None):
        """The state of the samples ``rows`` whose edge residuals are ``e`` (None: the forward pass)."""
        X = self.X if rows.size == self.X.shape[0] else self.X[rows]
        state = evaluate(self.graph, X, residuals=e, tangents=True, steps=self.steps, whole=True)
        if self.F is None:
            self.F = state.values[self.graph.output_node]
        return state

    def coefficients(self, state, rows):
        """``u = -b grad L`` at the output of ``state`` (the samples ``rows``)."""
        Y = self.Y if rows.size == self.Y.shape[0] else self.Y[rows]
        return -self.nudging * gradient(self.graph.output, self.loss, state.values[self.graph.output_node], Y)

    def keep(self, new, e, done):
        """Take the step's state ``new`` and residuals ``e`` of the samples ``rows``; ``done`` of them settled."""
        if self.rows.size == self.X.shape[0]:       # the whole batch: the step's own arrays
            self.values = {node.name: new.values[node.name] for node in self.graph.nodes}
            self.edges, self.pattern, self.tangents = e, new.pattern, new.tangents
        else:
            for full, part in ((self.values, new.values), (self.edges, e), (self.pattern, new.pattern)):
                for name, rows in full.items():
                    rows[self.rows] = part[name]
            self.tangents = {name: Rows(t, self.rows, new.tangents[name]) for name, t in self.tangents.items()}
        self.kept = np.flatnonzero(~done) if np.any(done) else None     # None: every sample goes on
        self.rows = self.rows if self.kept is None else self.rows[self.kept]


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
