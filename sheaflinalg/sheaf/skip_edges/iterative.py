"""The least-squares harmonic extension under ``skip_encoding="edges"`` without a factorisation.

Order the rows of the tall ``delta_Omega = A`` so that one row per free coordinate comes first: the
square unit lower triangular block ``T`` (a node with one parent: its edge; a coordinate ``j`` of an
``add`` node: the row ``j`` of one parent's edge, the parent of least depth, so a shortcut rather than
the residual branch; a ``concat`` node: the edge of the parent that feeds ``j``), then the ``m_E``
remaining rows ``E`` (the other parents' edges of the ``add`` nodes).  ``T`` is the sum encoding's
coboundary with each ``add`` node reading one parent, applied and inverted node by node
(:class:`~sheaflinalg.sheaf.matrix_free.coboundary.GraphCoboundary` with row masks).

With ``y = T d`` the problem ``min ||A d + rho||`` becomes ``min ||B y + rho||`` for
``B = [I; E T^{-1}]``, so ``B^T B = I + K^T K`` (``K = E T^{-1}``): its eigenvalues are 1
(multiplicity at least ``n - m_E``) and ``1 + sigma_i(K)^2``, all in ``[1, 1 + ||K||^2]``.  CGLS on
``B`` (conjugate gradients on the normal equations in ``y``, one sample at a time in lockstep) stops
when ``||B^T r|| <= tol ||y||``: since ``lambda_min(B^T B) >= 1``, ``||y - y*|| <= ||B^T r||``, a
bound that holds whatever ``K`` is.  It starts at the forward pass (``d = w - w_forward``), where
every edge vanishes except the ``add`` nodes' (``rho``), so a network without additions needs no
iteration.  docs/graph-networks.md has the derivation.
"""

from dataclasses import dataclass

import numpy as np

from ...network.graph.nodes import INPUT
from ..harmonic import HarmonicExtension, graph_extension
from ..layout import Layout
from ..matrix_free.coboundary import GraphCoboundary
from ..patterns import output_jacobian
from .encoding import fed_rows, is_split

#: Default stopping tolerance ``||B^T r|| <= TOL ||y||`` (relative error of ``y = T d`` at most TOL).
TOL = 1e-13
#: Restarts from the true residual when the recurrence's estimate passed the test but the true one does not.
RESTARTS = 3


def _depths(graph):
    """``{node: longest path from the input}`` (the input 0)."""
    depth = {INPUT: 0}
    for node in graph.nodes:
        depth[node.name] = 1 + max((depth[u] for u in node.inputs), default=0)
    return depth


def skip_rows(graph):
    """``{node: [(fed rows, T mask, E rows) per parent]}`` for every node split under ``"edges"``.

    Each row ``j`` of the node goes to ``T`` through the parent of least depth among those that feed
    it (first in ``node.inputs`` on ties); ``E`` keeps the other parents' rows.

    Raises
    ------
    numpy.linalg.LinAlgError
        A row is fed by no parent (``delta_Omega`` has no row there: not of full column rank).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> fc = sl.Node("fc", "linear", ["x"], params={"weight": [[2.0]], "bias": [0.0]})
    >>> net = sl.Network.from_nodes((1,), [fc, sl.Node("s", "add", ["fc", "x"])])
    >>> [(mask.tolist(), extra.tolist()) for _, mask, extra in skip_rows(net.graph)["s"]]
    [([0.0], [0]), ([1.0], [])]
    """
    depth, out = _depths(graph), {}
    for node in graph.nodes:
        if not is_split(node, "edges"):
            continue
        n = graph.sizes[node.name]
        fed = [fed_rows(F) for F in node.rule.blocks(node, graph)]
        masks, taken = [np.zeros(n) for _ in fed], np.zeros(n, dtype=bool)
        for i in sorted(range(len(fed)), key=lambda i: (depth[node.inputs[i]], i)):
            pick = fed[i][~taken[fed[i]]]
            masks[i][pick], taken[pick] = 1.0, True
        if not taken.all():
            raise np.linalg.LinAlgError(f"node {node.name!r}: rows fed by no parent; delta_Omega is not of full "
                                        "column rank under skip_encoding='edges'")
        out[node.name] = [(f, m, f[m[f] == 0]) for f, m in zip(fed, masks)]
    return out


class PreconditionedEdges:
    """``B = [I; K]``, ``K = E T^{-1}``, of a batch under a frozen pattern (see the module).

    Parameters
    ----------
    graph : Graph
    pattern : dict
        ``{node: (n_samples, size)}``, validated.
    jacobians : ndarray or None
        The output edge's ``J_phi`` per sample (rows), None for the reduced system.
    """

    def __init__(self, graph, pattern, jacobians):
        self.split = skip_rows(graph)
        self.T = GraphCoboundary(graph, pattern, jacobians, rows={v: [m for _, m, _ in parts]
                                                                  for v, parts in self.split.items()})
        self.graph, self.maps, self.layout = graph, self.T.maps, self.T.layout
        self.n_extra = sum(e.size for parts in self.split.values() for _, _, e in parts)

    def _edges(self):
        for name, parts in self.split.items():
            node = self.graph.node(name)
            for i, (parent, (_, _, extra)) in enumerate(zip(node.inputs, parts)):
                if extra.size:
                    yield name, i, parent, extra

    def extra(self, d):
        """``E d`` (rows), ``d`` a free cochain: ``(d_v - F_i d_(u_i))`` on each ``E`` row."""
        lay, parts = self.layout, []
        for name, i, parent, rows in self._edges():
            e = d[:, lay.free(name)][:, rows]
            if parent != INPUT:
                e = e - self.maps.forward(name, i, d[:, lay.free(parent)])[:, rows]
            parts.append(e)
        return np.concatenate(parts, axis=1) if parts else np.zeros((d.shape[0], 0))

    def extra_transpose(self, r):
        """``E^T r`` (rows), a free cochain."""
        lay, out, start = self.layout, np.zeros((r.shape[0], self.layout.n_free)), 0
        for name, i, parent, rows in self._edges():
            part = np.zeros((r.shape[0], self.graph.sizes[name]))
            part[:, rows] = r[:, start:start + rows.size]
            start += rows.size
            out[:, lay.free(name)] += part
            if parent != INPUT:
                out[:, lay.free(parent)] -= self.maps.transpose(name, i, part)
        return out

    def k(self, y):
        """``K y = E T^{-1} y``."""
        return self.extra(self.T.solve(y))

    def k_transpose(self, r):
        """``K^T r = T^{-T} E^T r``."""
        return self.T.solve_transpose(self.extra_transpose(r))

    def offsets(self, values):
        """``(rho_T, rho_E)``: the edges at the node values ``values`` of the sum encoding (input included),
        where only the ``add`` nodes' edges can be nonzero: the edge of parent ``i`` reads
        ``x_v - F_i x_(u_i)`` (for ``i = 0``, which carries the bias, ``sum over k > 0 of F_k x_(u_k)``)."""
        M, lay = values[INPUT].shape[0], self.layout
        rho_t, rho_e = np.zeros((M, lay.n_free)), []
        for name, parts in self.split.items():
            node = self.graph.node(name)
            mapped = [self.maps.forward(name, i, values[u]) for i, u in enumerate(node.inputs)]
            edges = [sum(mapped[1:]) if i == 0 else values[name] - mapped[i] for i in range(len(mapped))]
            own = rho_t[:, lay.free(name)]
            for (_, mask, extra), e in zip(parts, edges):
                own += e * mask
                rho_e.append(e[:, extra])
        return rho_t, (np.concatenate(rho_e, axis=1) if rho_e else np.zeros((M, 0)))


def _squares(a):
    """Each row's squared norm."""
    return np.einsum("ij,ij->i", a, a)


def _converged(gamma, y, tol):
    """Samples whose gradient ``||B^T r||^2 = gamma`` meets ``||B^T r|| <= tol ||y||`` (or vanishes)."""
    return (gamma == 0) | (np.sqrt(gamma) <= tol * np.sqrt(_squares(y)))


def _ratio(a, b):
    """``a / b`` where ``b > 0``, else 0."""
    return np.where(b > 0, a / np.where(b > 0, b, 1.0), 0.0)


def _cgls_steps(op, y, r_t, r_e, s, tol, budget):
    """At most ``budget`` CGLS steps on ``B`` from ``y`` (updated in place with the residual ``(r_t, r_e)``
    and the gradient ``s = B^T r``); a converged sample stays where it is.  Returns the steps taken."""
    p, gamma = s.copy(), _squares(s)
    for step in range(budget):
        active = ~_converged(gamma, y, tol)
        if not active.any():
            return step
        q = op.k(p)
        alpha = np.where(active, _ratio(gamma, _squares(p) + _squares(q)), 0.0)[:, None]
        y += alpha * p
        r_t -= alpha * p
        r_e -= alpha * q
        s = r_t + op.k_transpose(r_e)
        gamma, previous = _squares(s), gamma
        p = s + _ratio(gamma, previous)[:, None] * p
    return budget


def cgls(op, rho_t, rho_e, tol=TOL, maxiter=1000):
    """``(y, steps, ||B^T r||)``: ``y`` minimising ``||B y + rho||`` per sample (rows), by CGLS.

    The test ``||B^T r|| <= tol ||y||`` is made on the true residual ``r = -rho - B y`` (recomputed after
    the recurrence's estimate passed it; up to :data:`RESTARTS` restarts from there); the returned
    norms, of that true gradient, bound ``||y - y*||`` (``lambda_min(B^T B) >= 1``).
    """
    y, steps = np.zeros_like(rho_t), 0
    for attempt in range(RESTARTS + 2):
        r_t, r_e = -rho_t - y, -rho_e - (op.k(y) if steps else 0.0)
        s = r_t + op.k_transpose(r_e)
        if _converged(_squares(s), y, tol).all() or steps >= maxiter or attempt > RESTARTS:
            return y, steps, np.sqrt(_squares(s))
        steps += _cgls_steps(op, y, r_t, r_e, s, tol, maxiter - steps)


@dataclass
class IterativeReport:
    """How :func:`iterative_extension` solved the least-squares problem.

    Attributes
    ----------
    iterations : int
        CGLS steps (each: one forward and one backward substitution through ``T``, ``E`` and ``E^T``).
    error_bound : ndarray, shape (n_samples,)
        ``||B^T r||`` at the result: a bound on ``||T (w - w*)||``, ``w*`` the exact least-squares solution.
    relative : ndarray, shape (n_samples,)
        ``error_bound / ||T (w - w_forward)||`` (0 where the forward pass is the solution).
    n_extra : int
        Rows of ``E`` per sample (the ``add`` nodes' second edges).
    """

    iterations: int
    error_bound: np.ndarray
    relative: np.ndarray
    n_extra: int


def iterative_extension(graph, X, pattern=None, tol=TOL, maxiter=None):
    """``(HarmonicExtension, IterativeReport)``: the least-squares harmonic extension of a graph network under
    ``skip_encoding="edges"`` by preconditioned CGLS (see the module).

    ``X`` is flat ``(n_samples, n_inputs)`` and ``pattern`` normalised or None (checked by the caller);
    ``maxiter`` defaults to ``2 m_E + 100`` (at most 10,000), ``m_E`` the rows of ``E``.

    Raises
    ------
    numpy.linalg.LinAlgError
        No convergence within ``maxiter`` steps.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> fc = sl.Node("fc", "linear", ["x"], params={"weight": [[2.0]], "bias": [0.0]})
    >>> net = sl.Network.from_nodes((1,), [fc, sl.Node("s", "add", ["fc", "x"])])
    >>> h, report = iterative_extension(net.graph, np.array([[1.0]]))
    >>> h.free.round(6).tolist(), report.iterations            # fc = 5/3, s = yhat = 4/3
    ([[1.666667, 1.333333, 1.333333]], 2)
    """
    h = graph_extension(graph, X, pattern)
    values = dict(h.values, **{INPUT: X})
    op = PreconditionedEdges(graph, h.pattern, output_jacobian(graph.output, values[graph.output_node]))
    maxiter = min(2 * op.n_extra + 100, 10_000) if maxiter is None else maxiter
    y, steps, bound = cgls(op, *op.offsets(values), tol=tol, maxiter=maxiter)
    relative = _ratio(bound, np.sqrt(_squares(y)))
    if np.any(relative > tol):
        raise np.linalg.LinAlgError(f"the preconditioned CGLS did not reach ||B^T r|| <= {tol:g} ||y|| in {steps} "
                                    f"steps (reached {np.max(relative):.2e}); raise maxiter or use solver='direct'")
    free = h.free + op.T.solve(y)
    lay = Layout.from_graph(graph, skip_encoding="edges")
    return (HarmonicExtension(free=free, output=free[:, lay.free("yhat")], pattern=h.pattern,
                              self_consistent=h.self_consistent, layout=lay),
            IterativeReport(steps, bound, relative, op.n_extra))
