"""Newton steps for the pinned equilibrium of a smooth graph network (every pattern node a tangent).

With the output held at ``y`` (identity output: the held coordinates ``E^T w = y``) the pinned energy
``E(w) = 1/2 sum_v ||x_v - f_v(parents)||^2`` is a nonlinear least-squares problem in the free cochain
``w``.  Its Hessian is ``H = J^T J + sum_v r_v . nabla^2 f_v``: Gauss-Newton keeps the first term alone,
which is exact where the residuals vanish (the network's own output) but converges slowly, or crawls
under a line search, when the pin is far from the forward pass and the residuals are large.  Here every
step solves ``H d = -g`` on the free coordinates (``g`` the gradient, minus the force) by truncated
conjugate gradients:

- ``H v`` by central differences of the exact gradient, ``(g(w + h v) - g(w - h v)) / 2h`` with ``h`` of
  :data:`FD_STEP` relative (two force evaluations, no second derivatives in the rules; error ``O(h^2)``);
- preconditioned by the constrained Gauss-Newton inverse at ``w`` (:class:`GaussNewtonInverse`:
  ``P = L^{-1} - G S^{-1} G^T`` with ``L = delta^T delta``, ``G = L^{-1} E``, ``S = E^T G``; ``L^{-1}`` is a
  backward and a forward substitution): its first iterate is the Gauss-Newton step, and where the
  curvature is small the iteration ends after a few products;
- stopped at a relative residual ``min(0.1, sqrt(|g| / scale))`` (inexact Newton: superlinear near the
  minimum) or at a direction of non-positive curvature (then the iterate so far, or the Gauss-Newton step
  at the first product: a descent direction either way).

Each step is then shortened by the caller's line search on ``E`` (Armijo), so the energy decreases at
every step; the iteration ends when the force vanishes (the caller's rest test) or at ``max_iter``.
"""

import numpy as np

from ...sheaf.matrix_free.coboundary import GraphCoboundary

#: Relative step of the central differences of the gradient (``h = FD_STEP (1 + max|w|) / max|v|``).
FD_STEP = 1e-5
#: Most Hessian products of one Newton step's conjugate gradients.
CG_STEPS = 40


class GaussNewtonInverse:
    """``P r``: the constrained Gauss-Newton inverse at a state (see the module), zero on the held coordinates.

    Parameters
    ----------
    op : GraphCoboundary
        ``delta_Omega`` of the samples at their states (reduced layout: one edge per free block).
    index : ndarray of int, shape (k,)
        The held coordinates (free order).
    n_samples : int
        The rows of ``op`` (``G``, ``k`` columns of ``L^{-1}`` per sample, is kept: ``k x n_free`` each).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> from sheaflinalg.network.graph.forward import evaluate
    >>> net = sl.Network.from_nodes((2,), [sl.Node("t", "tanh", ["x"]), sl.Node("s", "silu", ["t"])])
    >>> X = np.array([[0.5, -1.0]])
    >>> P = GaussNewtonInverse(GraphCoboundary(net.graph, evaluate(net.graph, X).pattern), np.array([2, 3]), 1)
    >>> np.round(P(np.ones((1, 4))), 12).tolist()[0][2:]          # nothing moves the held output
    [0.0, 0.0]
    """

    def __init__(self, op, index, n_samples):
        self.op, self.index = op, index
        columns = []
        for i in index:                     # G's column i: one substitution pair of every sample
            unit = np.zeros((n_samples, op.layout.n_free))
            unit[:, i] = 1.0
            columns.append(self.inverse(unit))
        self.G = np.stack(columns, axis=1)                          # (samples, k, n_free)
        S = self.G[:, :, index]
        self.S_inv = np.linalg.inv(0.5 * (S + S.transpose(0, 2, 1)))

    def inverse(self, r):
        """``L^{-1} r = delta^{-1} delta^{-T} r`` (rows are the samples)."""
        return self.op.solve(self.op.solve_transpose(r))

    def __call__(self, r):
        lr = self.inverse(r)
        lam = np.einsum("mij,mj->mi", self.S_inv, lr[:, self.index])
        out = lr - np.einsum("mkn,mk->mn", self.G, lam)
        out[:, self.index] = 0.0
        return out


class PinnedNewton:
    """Newton's iteration on the pinned energy of a smooth graph network, with a line search (see the module).

    Parameters
    ----------
    sheaf : GraphSheaf
    layout : Layout
        The reduced layout (an identity output, held at ``index``).
    index : ndarray of int, shape (k,)
        The held coordinates (free order).
    gradient : callable
        ``gradient(X, w) -> (M, n_free)``: the pinned energy's gradient (zero on the held coordinates).
    rest : callable
        ``rest(X, w) -> (M,) bool``: whether a sample's force vanishes (an equilibrium).
    search : callable
        ``search(X, old, new, samples) -> (state, shortened)``: the line search from ``old`` towards ``new``
        (:class:`~sheaflinalg.discord.pinning.graph.LineSearch`; ``samples``: the rows' sample numbers).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.from_nodes((2,), [sl.Node("t", "tanh", ["x"]), sl.Node("s", "silu", ["t"])])
    >>> pd = sl.discord.pinned(net, [[0.5, -1.0]], [[3.0, -2.0]])     # far outside silu(tanh): Newton steps
    >>> pd.outcome.tolist()
    ['settled']
    """

    def __init__(self, sheaf, layout, index, gradient, rest, search):
        self.sheaf, self.layout, self.index = sheaf, layout, index
        self.gradient, self.rest, self.search = gradient, rest, search

    def run(self, X, state, max_iter, first=0):
        """``(state, rested)``: at most ``max_iter`` damped Newton steps of every sample not at rest (``first``:
        the sample number of the first row, for the line search's count)."""
        state = state.copy()
        rested = self.rest(X, state)
        for _ in range(max_iter):
            todo = np.flatnonzero(~rested)
            if todo.size == 0:
                break
            x, w = X[todo], state[todo]
            state[todo] = self.search(x, w, w + self.direction(x, w, self.gradient(x, w)), first + todo)[0]
            rested[todo] = self.rest(x, state[todo])
        return state, rested

    def _pattern(self, X, w):
        """Every pattern node's linearisation point at the state ``w``."""
        graph = self.sheaf.graph
        values = {node.name: w[:, self.layout.free(node.name)] for node in graph.nodes}
        return self.sheaf.residuals(X, values).pattern

    def hessian_product(self, X, w, v):
        """``H v`` per sample by central differences of the gradient (rows of ``v`` that are 0 give 0)."""
        size = np.abs(v).max(axis=1)
        h = FD_STEP * (1.0 + np.abs(w).max(axis=1)) / np.where(size > 0, size, 1.0)
        step = h[:, None] * v
        return (self.gradient(X, w + step) - self.gradient(X, w - step)) / (2.0 * h[:, None])

    def direction(self, X, w, g):
        """The truncated, preconditioned conjugate-gradient solution of ``H d = -g`` (see the module)."""
        P = GaussNewtonInverse(GraphCoboundary(self.sheaf.graph, self._pattern(X, w), maps=self.sheaf.maps,
                                               layout=self.layout), self.index, w.shape[0])
        r = -g
        z = P(r)
        gauss_newton, p, d = z.copy(), z.copy(), np.zeros_like(w)
        rz = np.einsum("ij,ij->i", r, z)
        norm = np.abs(g).max(axis=1)
        target = np.minimum(0.1, np.sqrt(norm / (1.0 + np.abs(w).max(axis=1)))) * norm
        live = rz > 0
        for _ in range(CG_STEPS):
            rows = np.flatnonzero(live)
            if rows.size == 0:
                break
            Hp = self.hessian_product(X[rows], w[rows], p[rows])
            curvature = np.einsum("ij,ij->i", p[rows], Hp)
            bent = curvature <= 0.0         # non-positive curvature: keep the iterate so far
            live[rows[bent]] = False
            rows, Hp, curvature = rows[~bent], Hp[~bent], curvature[~bent]
            alpha = rz[rows] / curvature
            d[rows] += alpha[:, None] * p[rows]
            r[rows] -= alpha[:, None] * Hp
            live[rows[np.abs(r[rows]).max(axis=1) <= target[rows]]] = False
            z = P(r)
            new = np.einsum("ij,ij->i", r, z)
            p[rows] = z[rows] + (new[rows] / rz[rows])[:, None] * p[rows]
            rz[rows] = new[rows]
        ascent = np.einsum("ij,ij->i", d, g) >= 0.0        # no descent (a first bend, or rounding): Gauss-Newton
        d[ascent] = gauss_newton[ascent]
        return d
