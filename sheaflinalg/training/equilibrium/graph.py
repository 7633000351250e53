"""Exact equilibria of graph networks (convolutions, pooling, batch norm, additions, concatenations).

For a frozen activation pattern every node's value ``w`` follows from the edge
residuals ``e`` by forward substitution, ``w = w_f + delta_Omega^{-1} e``
(``w_f`` the forward pass under the pattern), so the output node's value is
``z = f + J e`` with ``J = E^T delta_Omega^{-1}`` (``E`` selecting the output
node's coordinates).  The minimiser of ``1/2 ||e||^2 + b L(z)`` is
``e = J^T u``: the ``n_out`` rows of ``J`` of every sample are one batched
backward substitution (:meth:`~sheaflinalg.sheaf.matrix_free.coboundary.GraphCoboundary.solve_transpose`,
``n_out`` seeds per sample, each under its sample's pattern), ``G = J J^T``
their Gram matrix, the output's displacement the small problem of
:func:`~.loss_edge.solve_coefficients`, ``e`` the rows'
combination ``J^T G^-1 w`` and the state one forward substitution: about
``n_out + 1`` backpropagations' worth of work, and no iteration for a fixed
pattern but the loss's Newton steps in ``R^{n_out}``.  At a small nudging
(``|b| <= 1e-3``, nothing held) the chains' fixed point
(:func:`~.loss_edge.fixed_point`) comes first: ``u = -b grad L(f + J J^T u)``,
each step one backward substitution of ``u`` and one forward substitution of
its residuals (2 steps at ``b = 1e-6``: it stops within
:func:`~.loss_edge.fixed_point_tolerance` of the solution, a fraction of the nudging's own bias), about
2.6 times faster than the Gram matrix on the MNIST-1D CNN.

Coordinates held on a ReLU switching surface (Filippov sliding,
:mod:`~sheaflinalg.sheaf.matrix_free.switching`) are extra rows of
``delta_Omega^{-1}`` joining ``J`` with the constraint that they move their
coordinate's forward value ``k_f`` to 0 (``c = -k_f``), as for chains
(:mod:`.frozen`): ``P`` and the linear term ``h = (G^-1)_{JK} c`` are read
off the inverse Gram matrix.  The pattern
is iterated until it is self-consistent (:func:`~sheaflinalg.sheaf.matrix_free.switching.iterate_pattern`),
sliding where it cycles, up to a cap (at small nudging, :data:`TIES_NUDGING`, the ties of
the forward pass are decided in the batch by the sign of the response: a max-pool window
keeps the selection solved under when the solution moves it down, a pre-activation at
exactly 0 turns inactive when the solution moves it down and stays so); then the weights' gradient is the
parameter velocity at the equilibrium (envelope theorem,
:class:`~sheaflinalg.training.velocity.ParameterVelocity`: shared
convolution weights summed over positions, batch norm's folded affine),
``g = -scale * velocity / b``.
"""

from dataclasses import dataclass

import numpy as np

from ..._common.spare import spare_empty
from ..._common.threads import blas_limit
from ..._common.validation import check_bool, check_int
from ...network.graph.forward import evaluate
from ...network.ops import MASK, SELECTION
from ...sheaf.matrix_free.residuals import GraphSheaf, StateResiduals
from ...sheaf.matrix_free.filippov import settle_surfaces
from ...sheaf.matrix_free.switching import decided_slides, forward_ties, iterate_pattern, node_values
from ...sheaf.layout import Layout
from ...sheaf.matrix_free.coboundary import GraphCoboundary
from ..output_edge import check_graph_loss, loss_gradient_scale, loss_pull
from ..velocity import GraphParameters, ParameterVelocity
from .oracle import EquilibriumOracle, SettleReport
from .loss_edge import REST, fixed_point, potential, solve_coefficients, takes_fixed_point
from .smooth import smooth_equilibrium, takes_smooth_path

#: Largest nudging ``|b|`` at which a max-pool tie of the forward pass is decided by the selection solved under
#: (:func:`~sheaflinalg.sheaf.matrix_free.switching.read_pattern`): the state is then ``O(b)`` from the
#: window's sliding mode, the order of the method's own error in the gradient.  Measured on a Conv -> ReLU ->
#: MaxPool CNN on stroke digits (zero background, batch 100, nudging 1e-6): 100 of 100 samples unsettled and
#: 193 ms before, none and 10 ms after (1 frozen solve instead of 3 and no per-sample search), ``g`` the same.
#: Pre-activations at exactly 0 (:func:`~sheaflinalg.sheaf.matrix_free.switching.read_pattern`) likewise: on a
#: bias-free Conv -> ReLU -> MaxPool -> Conv -> ReLU CNN on stroke images, 99 of 100 unsettled, 12 solves and
#: 3.1 s a batch before, none, 4 solves and 0.14 s after.
TIES_NUDGING = 1e-3


@dataclass
class GraphSettlement:
    """The equilibria of one mini-batch.

    Attributes
    ----------
    graph : Graph
        The network at the weights ``theta``.
    values : dict
        ``{node: (M, size)}``: every node's equilibrium value.
    edges : dict
        ``{node: (M, size)}``: the edge residuals at the equilibrium (as solved: ``J^T u``).
    pattern : dict
        ``{node: (M, size)}``: the pattern the equilibrium was solved under.
    settled : ndarray of bool, shape (M,)
    sliding : list of list
        Per sample, the ``(node, coordinate)`` pairs held on a switching surface.
    report : SettleReport
    """

    graph: object
    values: dict
    edges: dict
    pattern: dict
    settled: np.ndarray
    sliding: list
    report: SettleReport


class _NudgedSolve:
    """Frozen-pattern equilibria with the output nudged (the module docstring), a frozen solve of
    :mod:`~sheaflinalg.sheaf.matrix_free.switching`: ``(M, 2 n_free)``, the free cochains in the reduced layout
    and then the edge residuals (same offsets), kept as solved: recomputing them from the state
    (``w - prediction``) would lose their digits to cancellation when they are as small as the nudging."""

    #: Rows (samples x seeds) per batched backward substitution.
    BLOCK = 4096

    def __init__(self, graph, maps, loss, nudging, order=1, buffers=None):
        self.graph, self.maps, self.loss, self.nudging, self.order = graph, maps, loss, nudging, order
        self.buffers = ResponseBuffers() if buffers is None else buffers
        self.layout = Layout.from_graph(graph, reduced=True)
        out = self.layout.free(graph.output_node)
        self.output = np.arange(out.start, out.stop)
        self.width = 2 * self.layout.n_free

    def __call__(self, X, Y, pattern, surface=(), values=None):
        index = np.concatenate([self.output, [self.layout.free(u).start + j for u, j in surface]]).astype(np.int64)
        values = evaluate(self.graph, X, pattern, threads=1).values if values is None else values
        if takes_fixed_point(self.nudging, len(surface)):
            solved = fixed_point(self._respond(pattern, X.shape[0]), values[self.graph.output_node], Y,
                                 self.nudging, self.graph.output, self.loss, self.order)
            if solved is not None:
                return self._state(values, *solved)
        w = np.concatenate([values[node.name] for node in self.graph.nodes], axis=1)
        e = np.empty_like(w)
        step = max(1, self.BLOCK // index.size)
        for lo in range(0, X.shape[0], step):
            rows = slice(lo, lo + step)
            e[rows] = self._residuals(w[rows], Y[rows], {name: p[rows] for name, p in pattern.items()}, index)
        w += GraphCoboundary(self.graph, pattern, maps=self.maps, layout=self.layout).solve(e)
        w[:, index[self.output.size:]] = 0.0       # held on the surface: exactly, not up to rounding
        return np.concatenate([w, e], axis=1)

    def _state(self, values, e, shift):
        """``[w + shift, e]``, ``w`` the nodes' ``values`` side by side, written in one pass into one array (a
        kept buffer that nothing holds any more, :func:`~sheaflinalg._common.spare.spare_empty`: fresh pages
        cost more than the pass); ``e`` and ``shift`` are ``{node: (M, size)}``."""
        n = self.layout.n_free
        M = e[self.graph.output_node].shape[0]
        out = spare_empty(M * 2 * n).reshape(M, 2 * n)
        for node in self.graph.nodes:
            where = self.layout.free(node.name)
            np.add(values[node.name], shift[node.name], out=out[:, where])
            out[:, n + where.start:n + where.stop] = e[node.name]
        return out

    def _respond(self, pattern, M):
        """The response to output coefficients ``u`` for :func:`~.loss_edge.fixed_point`: the residuals
        ``J^T u`` (one backward substitution per sample) and the state's shift (one forward substitution), on
        node blocks (:attr:`buffers`, reused by every step)."""
        op = GraphCoboundary(self.graph, pattern, maps=self.maps, layout=self.layout)
        e, shift = self.buffers.blocks(self.graph, M)
        out = self.graph.output_node

        def respond(u):
            op.solve_blocks(op.solve_transpose_blocks({out: u}, e), shift)
            return (e, shift), shift[out]
        return respond

    def _residuals(self, w, Y, pattern, index):
        """The equilibrium's edge residuals ``A^T c`` of a block of samples (``A`` the rows ``index`` of
        ``delta_Omega^{-1}``, one backward substitution per row)."""
        b, k, n = w.shape[0], index.size, self.output.size
        op = GraphCoboundary(self.graph, {name: np.repeat(p, k, axis=0) for name, p in pattern.items()},
                             maps=self.maps, layout=self.layout)
        seeds = np.zeros((b * k, self.layout.n_free))
        seeds[np.arange(b * k), np.tile(index, b)] = 1.0
        A = op.solve_transpose(seeds).reshape(b, k, -1)
        c = -w[:, index[n:]]                                        # the held rows move their values to 0
        coefficients, _, _ = solve_coefficients(A @ A.transpose(0, 2, 1), c, w[:, index[:n]], Y, self.nudging,
                                                self.graph.output, self.loss)
        return (coefficients[:, None, :] @ A)[:, 0]


class ResponseBuffers:
    """The fixed point's residuals and shift as contiguous ``{node: (M, size)}`` blocks of two flat buffers, kept
    by an oracle from one batch to the next (made again when ``M`` or the sizes change).

    Fresh pages cost their first touch: a batch of 100 through the stroke-image CNN made about 4,300 page faults
    (two cochains of 3 MB for these two among them), several milliseconds of a 20 ms batch.  The blocks are the
    fixed point's scratch: its answer is copied out (:meth:`_NudgedSolve._state`) before the next batch, and
    one oracle is not used from two threads at once.
    """

    def __init__(self):
        self._key, self._blocks = None, None

    def blocks(self, graph, M):
        """``(e, shift)``: two ``{node: (M, size)}`` dicts of contiguous arrays (their contents undefined)."""
        sizes = [(node.name, graph.sizes[node.name]) for node in graph.nodes]
        if self._key != (M, sizes):
            total = M * sum(size for _, size in sizes)
            self._blocks = tuple(_carve(np.empty(total), sizes, M) for _ in range(2))
            self._key = (M, sizes)
        return self._blocks


def _carve(buffer, sizes, M):
    """``{name: (M, size)}`` contiguous views of ``buffer``, one after the other."""
    blocks, start = {}, 0
    for name, size in sizes:
        blocks[name] = buffer[start:start + M * size].reshape(M, size)
        start += M * size
    return blocks


def _masks_and_selections(graph):
    """Whether every pattern node of ``graph`` is a mask (rectifier) or a selection (max-pool)."""
    return all(graph.node(name).rule.pattern in (MASK, SELECTION) for name in graph.pattern_nodes)


class GraphEquilibrium(EquilibriumOracle):
    """The exact-equilibrium oracle of a graph network (the contract of :mod:`.oracle`).

    Parameters
    ----------
    graph : Graph
        The network's structure (its parameter values are replaced by ``theta`` at every call).
    loss : {"mse", "cross_entropy"}
    max_iter : int
        Frozen-pattern solves per sample at most (pattern iteration, then sliding).
    symmetric : bool, optional
        Whether the caller averages the gradients of ``+b`` and ``-b``: the smooth path's tolerance
        (:func:`~.smooth.settling_tolerance`) and the loss edge's fixed point's
        (:func:`~.loss_edge.fixed_point_tolerance`) are then tied to that method's ``O(b^2)`` bias.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> conv = sl.Node("c", "conv", ["x"], {"stride": 1, "padding": 1, "dilation": 1, "groups": 1},
    ...                {"weight": np.full((2, 1, 3), 0.5), "bias": np.zeros(2)})
    >>> fc = sl.Node("fc", "linear", ["f"], params={"weight": np.ones((2, 8)), "bias": np.zeros(2)})
    >>> net = sl.Network.from_nodes((1, 4), [conv, sl.Node("r", "relu", ["c"]),
    ...                              sl.Node("f", "reshape", ["r"], {"shape": (8,)}), fc], output="softmax")
    >>> oracle = GraphEquilibrium(net.graph, "cross_entropy")
    >>> theta = GraphParameters(net.graph).flat()
    >>> g = np.empty_like(theta)
    >>> report = oracle.gradient(theta, np.array([[1.0, -2.0, 3.0, 0.5]]), np.array([[1.0, 0.0]]), 1e-6, g)
    >>> report.iterations, report.unsettled, bool(np.allclose(g[-2:], [-0.5, 0.5]))
    (1, 0, True)
    """

    def __init__(self, graph, loss, max_iter=20, symmetric=False):
        check_graph_loss(loss)
        self.graph, self.loss, self.symmetric = graph, loss, check_bool(symmetric, "symmetric")
        self.max_iter = check_int(max_iter, "max_iter")
        self.params = GraphParameters(graph)
        self.velocity = ParameterVelocity(graph)
        self.buffers = ResponseBuffers()

    def _check(self, theta, X, Y, nudging):
        """``(theta, X, Y, b)`` as float64 arrays and a float, or a ValueError naming what is wrong (before any work)."""
        theta, X, Y = (np.asarray(a, dtype=np.float64) for a in (theta, X, Y))
        if theta.shape != (self.params.size,) or not np.all(np.isfinite(theta)):
            raise ValueError(f"theta must be a finite vector of the graph's {self.params.size} parameters, "
                             f"got shape {theta.shape}" + ("" if theta.shape != (self.params.size,) else
                                                          " with NaN or Inf"))
        n_in, n_out = int(np.prod(self.graph.input_shape)), self.graph.n_outputs
        if X.ndim != 2 or X.shape[1] != n_in or Y.shape != (X.shape[0], n_out) or X.shape[0] == 0:
            raise ValueError(f"X and Y must have shapes (M, {n_in}) and (M, {n_out}) with M >= 1, got {X.shape} "
                             f"and {Y.shape}")
        if not (np.all(np.isfinite(X)) and np.all(np.isfinite(Y))):
            raise ValueError("X and Y must be finite (they hold NaN or Inf)")
        if not (isinstance(nudging, (int, float, np.integer, np.floating)) and np.isfinite(nudging) and nudging != 0):
            raise ValueError(f"the nudging must be finite and nonzero, got {nudging!r}")
        return theta, np.ascontiguousarray(X), np.ascontiguousarray(Y), float(nudging)

    def settle(self, theta, X, Y, nudging):
        """:class:`GraphSettlement` of the batch ``(X, Y)`` at the weights ``theta`` and the nudging ``b``."""
        theta, X, Y, nudging = self._check(theta, X, Y, nudging)
        with blas_limit(1):         # the products are batch-sized: BLAS threads only spin (the forward pass's rule)
            return self._settle(theta, X, Y, nudging)

    def _settle(self, theta, X, Y, nudging):
        graph = self.params.graph(theta)
        sheaf = GraphSheaf(graph)
        smooth = smooth_equilibrium(graph, sheaf.maps, X, Y, nudging, self.loss, self.symmetric) \
            if takes_smooth_path(graph, nudging) else None
        tied = None
        if smooth is None:
            solve = _NudgedSolve(graph, sheaf.maps, self.loss, float(nudging), 2 if self.symmetric else 1,
                                 self.buffers)
            tied = forward_ties(graph, X) if abs(nudging) <= TIES_NUDGING else None
            state, pattern, settled, iterations = iterate_pattern(solve, graph, X, Y, self.max_iter, tied)
            sliding = settle_surfaces(solve, sheaf, X, Y, state, pattern, settled,
                                      self._forces(sheaf, X, Y, nudging), REST, self.max_iter, tied)
            n = solve.layout.n_free
            # views of the state (a kept buffer, held while they are): what reads them takes strided rows, the
            # compiled velocity of a convolution copies its own (a copy of every node was a pass over 6 MB a batch)
            values, edges = node_values(graph, solve.layout, state), node_values(graph, solve.layout, state[:, n:])
            # with every tie decided, the residuals as solved under the pattern solved under (below) are the
            # ones to check: reading them off the state again is needed only for other pattern kinds
            as_solved = tied is not None and _masks_and_selections(graph)
            res = StateResiduals(edges, pattern) if as_solved else sheaf.residuals(X, values)
        else:       # no switching surfaces (no masks); the residuals are the last step's, at the state's tangents
            (values, edges, pattern, tangents, iterations), settled = smooth, np.ones(X.shape[0], dtype=bool)
            sliding, res = [[] for _ in range(X.shape[0])], StateResiduals(edges, tangents)
        z = values[graph.output_node]
        energy = float(np.sum(sheaf.energy(res)) + nudging * np.sum(potential(graph.output, self.loss, z, Y)))
        if tied is not None:    # ties decided by the response: the selections and masks solved under, their residuals
            res = StateResiduals(edges, {name: pattern[name] if graph.node(name).rule.pattern in (SELECTION, MASK)
                                         else p for name, p in res.pattern.items()})
        if smooth is None:      # the smooth iteration stops within its declared tolerance of its fixed point
            settled &= self._at_rest(sheaf, X, Y, nudging, values, res, sliding, as_solved)
        decided = 0 if tied is None else decided_slides(graph, tied, pattern, values, settled)
        report = SettleReport(iterations, int(np.sum(~settled)), sum(len(s) for s in sliding), energy, decided)
        return GraphSettlement(graph, values, edges, pattern, settled, sliding, report)

    def _forces(self, sheaf, X, Y, nudging):
        """``forces(values) -> (edges, force)``: the residuals at ``values`` (the pattern read off them) and the
        force on every node, the nudged loss's pull on the output node included."""
        out = self.graph.output_node

        def forces(values, res=None):
            res = sheaf.residuals(X, values) if res is None else res
            force = sheaf.force(res)
            pull, _ = loss_pull(self.graph.output, self.loss, values[out], Y)
            force[out] += nudging * pull
            return res.edges, force
        return forces

    def _at_rest(self, sheaf, X, Y, nudging, values, res, sliding, as_solved=False):
        """Per sample, whether the force on every coordinate (the nudged loss's pull on the output node
        included, the held surface coordinates excluded) vanishes to :data:`REST` relative.

        ``as_solved``: ``res`` holds the residuals and the pattern the frozen solves returned.  Those residuals
        are ``delta_P^{-T}`` of seeds on the output and held coordinates only (a backward substitution under
        ``P``: the fixed point's ``u``, or the Gram path's coefficients), so the force ``-delta_P^T e`` is
        minus the seeds, zero to rounding on every other coordinate: only the output node's force is computed
        (the interior one is asserted in the tests)."""
        out = self.graph.output_node
        if as_solved and out in res.edges:
            pull, _ = loss_pull(self.graph.output, self.loss, values[out], Y)
            force = {out: nudging * pull - res.edges[out]}
        else:
            _, force = self._forces(sheaf, X, Y, nudging)(values, res)
        for s, held in enumerate(sliding):
            for u, j in held:
                if u in force:
                    force[u][s, j] = 0.0
        largest = np.max([np.abs(f).max(axis=1) for f in force.values()], axis=0)
        scale = 1.0 + np.maximum(np.max([np.abs(v).max(axis=1) for v in values.values()], axis=0),
                                 np.abs(X).max(axis=1))
        return largest <= REST * scale

    def gradient(self, theta, X, Y, nudging, out):
        """Fill ``out`` with ``g = scale * grad_theta E_b(x*) / b`` (the contract); returns the :class:`SettleReport`."""
        if not (isinstance(out, np.ndarray) and out.shape == (self.params.size,) and out.dtype == np.float64):
            raise ValueError(f"out must be a float64 array of shape ({self.params.size},), got "
                             f"{getattr(out, 'dtype', type(out).__name__)} {np.shape(out)}")
        settlement = self.settle(theta, X, Y, nudging)
        X = np.asarray(X, dtype=np.float64)
        with blas_limit(1):
            self.velocity.flat(self.params, X, settlement.values, settlement.edges, out=out)
        out *= -loss_gradient_scale(self.loss, X.shape[0], self.graph.n_outputs) / nudging
        return settlement.report

