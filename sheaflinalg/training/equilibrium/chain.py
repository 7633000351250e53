"""Exact equilibria of chain MLPs: the oracle of quasi-static training for ``Network`` chains.

For weights ``theta`` and a mini-batch, every sample's state minimises ::

    E_b(x) = 1/2 sum over interior edges ||e(x)||^2  +  b * loss(z_(k+1), y)

with the activation pattern read off the state itself (``z >= 0`` active).
Each pattern iteration solves the frozen-pattern problem exactly
(:func:`~.frozen.frozen_equilibrium`: a rank-``n_out`` correction of the
forward pass, vectorised over the batch) and reads the pattern off the
solution; the samples whose pattern changed are solved again (only those),
until every pattern is self-consistent.  A sample whose patterns cycle has a
Filippov equilibrium on switching surfaces (:mod:`.sliding`); a sample still
moving after ``max_iter`` solves is counted as unsettled and its last iterate
is used.

The weight velocity at the equilibrium is ``-grad_theta E_b`` (envelope
theorem): ``e_z_l a_(l-1)^T`` for ``W_l`` and ``e_z_l`` for ``b_l``, with the
equilibrium's activations.  :meth:`ChainEquilibrium.gradient` returns
``g = scale * grad_theta E_b / b`` summed over the batch, ``scale`` as in
:func:`~sheaflinalg.training.output_edge.loss_gradient_scale`: backpropagation's
gradient of the batch's mean loss, with an error ``O(b)`` (``O(b^2)`` for the
average of ``+b`` and ``-b``).
"""

from dataclasses import dataclass

import numpy as np

from ..._common.validation import check_bool, check_dims, check_int, check_real
from ...network import activations
from ...network.model import parameter_offsets
from ...sheaf.layout import Layout
from ..output_edge import loss_gradient_scale
from ..losses import resolve_loss
from .chain_linear import forward, unpack
from .frozen import frozen_equilibrium
from .loss_edge import check_equilibrium_loss
from .oracle import EquilibriumOracle, SettleReport
from .sliding import PatternSearch

#: Default cap on pattern iterations (frozen solves) per sample.
MAX_ITER = 50


@dataclass
class ChainSettle:
    """The equilibria of one mini-batch (:meth:`ChainEquilibrium.settle`).

    Attributes
    ----------
    state : ndarray, shape (S, n_free)
        Free cochain in the order of ``Layout(dims)``: ``z1, a1, ..., z(k+1), yhat`` (``yhat`` = the targets).
    residuals : ndarray, shape (S, n_edges)
        Edge residuals in the layout's edge order ``e_z1, e_a1, ..., e_z(k+1), e_y``
        (``e_a_l = a_l - m_l z_l`` with the pattern below; ``e_y = y - phi(z_(k+1))``).
    pattern : list of ndarray
        ``(S, n_l)`` boolean masks of the hidden layers (held coordinates: False).
    sliding : list of list of (int, int)
        Per sample, the ``(layer, neuron)`` coordinates held on the switching surface ``z = 0``.
    settled : ndarray of bool, shape (S,)
    energy : ndarray, shape (S,)
        ``E_b(x*)`` per sample.
    report : SettleReport
    layout : Layout
    """

    state: np.ndarray
    residuals: np.ndarray
    pattern: list
    sliding: list
    settled: np.ndarray
    energy: np.ndarray
    report: SettleReport
    layout: Layout


class _Batch:
    """The equilibria of a batch under construction: every sample's last frozen solution and its pattern."""

    def __init__(self, S):
        self.Zs = self.As = self.ez = self.ea = self.masks = None
        self.energy = np.zeros(S)
        self.iterations = np.zeros(S, dtype=np.int64)
        self.settled = np.zeros(S, dtype=bool)
        self.sliding = [[] for _ in range(S)]

    def store(self, rows, frozen, iterations):
        """Keep ``frozen`` (the solution of the samples ``rows``) as their current solution.

        The first store is of every sample in order (the first pattern iteration solves the whole
        batch): its arrays are kept, and later stores write the samples solved again into them.
        """
        first = self.Zs is None
        for name in ("Zs", "As", "ez", "ea", "masks"):
            if first:
                setattr(self, name, list(getattr(frozen, name)))
                continue
            for mine, part in zip(getattr(self, name), getattr(frozen, name)):
                mine[rows] = part
        self.energy[rows] = frozen.energy
        self.iterations[rows] = iterations
        for i, s in enumerate(rows):
            self.sliding[s] = frozen.held[i] if frozen.held else []


class ChainEquilibrium(EquilibriumOracle):
    """Exact equilibria of a chain MLP (``Network`` of Linear/ReLU layers) for quasi-static training.

    Parameters
    ----------
    dims : sequence of int
        Layer widths ``[n_0, ..., n_(k+1)]`` (``net.dims``).
    output : {"identity", "sigmoid", "tanh", "softmax"}
        Output activation (``net.output``).
    loss : {"mse", "cross_entropy"}, optional
        Default: cross-entropy for sigmoid/softmax outputs, else mean squared error.
    loss_param : None
        The two losses take none (kept for the signature of the other training entries).
    max_iter : int
        Largest number of pattern iterations (frozen solves) per sample.
    names : sequence of str, optional
        The chain's node names (``net.chain.names``; default ``z1, a1, ...``): the labels of :attr:`layout`.
    symmetric : bool
        Whether the caller averages the answers at ``+b`` and ``-b`` (symmetric nudging): the frozen solves'
        fixed point then solves to the tighter tolerance of the ``O(b^2)`` bias
        (:func:`~.loss_edge.fixed_point_tolerance`).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 8, 1], seed=0)
    >>> X, Y = sl.tasks.paraboloid(20, seed=0)
    >>> oracle = ChainEquilibrium(net.dims, net.output)
    >>> g = np.zeros(net.n_parameters)
    >>> report = oracle.gradient(net.parameters(), X, Y, 1e-6, g)
    >>> report.unsettled, report.sliding
    (0, 0)
    """

    def __init__(self, dims, output="identity", loss=None, loss_param=None, max_iter=MAX_ITER, names=None,
                 symmetric=False):
        self.dims = check_dims(dims)
        self.order = 2 if check_bool(symmetric, "symmetric") else 1
        self.output = activations.check_output(output)
        self.loss, self.loss_param = resolve_loss(loss, loss_param, output)
        check_equilibrium_loss(self.loss)
        self.max_iter = check_int(max_iter, "max_iter")
        self.n_parameters = parameter_offsets(self.dims)[2]
        self.layout = Layout(self.dims, names=names)

    # ------------------------------------------------------------------ public
    def settle(self, theta, X, Y, nudging):
        """The equilibria of the batch ``(X, Y)`` at weights ``theta`` and nudging ``b`` (a :class:`ChainSettle`)."""
        batch, report = self._settle(theta, X, Y, nudging)
        lay, k = self.layout, len(self.dims) - 2
        state = np.empty((X.shape[0], lay.n_free))
        res = np.empty((X.shape[0], lay.n_edges))
        for l in range(1, k + 2):
            state[:, lay.free(lay.z(l))] = batch.Zs[l - 1]
            res[:, lay.edge("e_" + lay.z(l))] = batch.ez[l - 1]
            if l <= k:
                state[:, lay.free(lay.a(l))] = batch.As[l - 1]
                res[:, lay.edge("e_" + lay.a(l))] = batch.ea[l - 1]
        state[:, lay.free("yhat")] = Y
        res[:, lay.edge("e_y")] = Y - activations.apply(self.output, batch.Zs[-1])
        pattern = [m > 0 for m in batch.masks]
        return ChainSettle(state, res, pattern, batch.sliding, batch.settled, batch.energy, report, lay)

    def gradient(self, theta, X, Y, nudging, out):
        """``out = scale * grad_theta E_b(x*) / b`` summed over the batch; returns the :class:`SettleReport`."""
        theta = np.asarray(theta)
        if not (isinstance(out, np.ndarray) and out.shape == (self.n_parameters,) and out.dtype == np.float64):
            raise ValueError(f"out must be a float64 array of shape ({self.n_parameters},) (theta's), got "
                             f"{getattr(out, 'dtype', type(out).__name__)} {np.shape(out)}")
        batch, report = self._settle(theta, X, Y, nudging)
        b = float(nudging)
        factor = -loss_gradient_scale(self.loss, X.shape[0], self.dims[-1]) / b
        woff, boff, _ = parameter_offsets(self.dims)
        for l in range(1, len(self.dims)):
            a_prev = X if l == 1 else batch.As[l - 2]
            e = batch.ez[l - 1]
            out[woff[l]:woff[l] + e.shape[1] * a_prev.shape[1]] = (factor * (e.T @ a_prev)).ravel()
            out[boff[l]:boff[l] + e.shape[1]] = factor * e.sum(axis=0)
        return report

    # ---------------------------------------------------------------- internals
    def _settle(self, theta, X, Y, nudging):
        theta, X, Y, b = self._check(theta, X, Y, nudging)
        Ws, bs = unpack(theta, self.dims)
        S = X.shape[0]
        Zs, _ = forward(Ws, bs, X, None)
        search = PatternSearch([(z >= 0).astype(np.float64) for z in Zs[:-1]], S)
        batch = _Batch(S)
        todo = np.arange(S)
        for it in range(1, self.max_iter + 1):
            frozen = frozen_equilibrium(Ws, bs, X[todo], Y[todo], [m[todo] for m in search.masks], b,
                                        self.output, self.loss, search.held(todo), Zs if it == 1 else None, self.order)
            batch.store(todo, frozen, it)
            settled = search.update(todo, frozen, Ws, bs, X)
            batch.settled[todo[settled]] = True
            todo = todo[~settled]
            if todo.size == 0:
                break
        report = SettleReport(iterations=int(batch.iterations.max()), unsettled=int(S - batch.settled.sum()),
                              sliding=sum(map(len, batch.sliding)), energy=float(batch.energy.sum()))
        return batch, report

    def _check(self, theta, X, Y, nudging):
        """Shapes, finiteness and a nonzero finite nudging, before any work."""
        n0, n_out = self.dims[0], self.dims[-1]
        theta = np.asarray(theta, dtype=np.float64)
        if theta.shape != (self.n_parameters,):
            raise ValueError(f"theta must have shape ({self.n_parameters},) for dims {self.dims}, got {theta.shape}")
        if not np.isfinite(theta).all():
            raise ValueError("theta contains NaN or Inf: the weights diverged")
        X = np.asarray(X, dtype=np.float64)
        Y = np.asarray(Y, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != n0 or X.shape[0] < 1:
            raise ValueError(f"X must have shape (n_samples >= 1, {n0}), got {X.shape}")
        if Y.shape != (X.shape[0], n_out):
            raise ValueError(f"Y must have shape ({X.shape[0]}, {n_out}) (one target row per sample of X), "
                             f"got {Y.shape}")
        if not (np.isfinite(X).all() and np.isfinite(Y).all()):
            raise ValueError("X or Y contains NaN or Inf")
        b = check_real(nudging, "nudging")
        if not np.isfinite(b) or b == 0:
            raise ValueError(f"nudging must be a finite nonzero number, got {nudging!r}")
        return theta, X, Y, b
