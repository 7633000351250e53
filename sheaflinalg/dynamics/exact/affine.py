"""The affine vector field of the restricted heat equation in one activation region.

For a frozen activation pattern ``m`` and identity output the heat equation is
``d omega/dt = -alpha (L_m omega + c_m)`` with ``L_m = D_m^T D_m`` and
``c_m = D_m^T e``, where ``D_m`` is the (augmented, possibly tall) coboundary on
the layout's free coordinates and ``e = delta_U u + edge_offset`` its constant
part (from :func:`sheaflinalg.assemble`; soft pins and reluctance edges included).
``e`` does not depend on the pattern, and ``D_m`` differs between patterns only
in the ``-R_l`` blocks of the activation edges, so one assembly serves every pattern.

Hard pins and sliding coordinates (``z_j`` held at 0, Filippov) form the set
``P`` of coordinates held fixed in a segment; the others, ``F``, follow
``d omega_F/dt = -alpha (L_FF omega_F + D_F^T (D_P omega_P + e))``: a principal
submatrix of ``L_m``, still symmetric positive definite.
"""

import numpy as np
import scipy.sparse as sp

from ...kernels.exact.structs import ExactOperator
from ...sheaf.pins import specs as _pins
from ...sheaf.assembled.assembly import assemble
from ...sheaf.layout import Layout


def _dummy_soft(soft):
    """A one-sample soft-pin specification with ``soft``'s coordinates and strengths (targets 0)."""
    if not soft.size:
        return None
    return _pins.SoftPins({lab: 0.0 for lab in soft.labels},
                          gamma={lab: float(g) for lab, g in zip(soft.labels, soft.gamma)})


class AffineField:
    """Pattern-independent pieces of the affine field of a batch.

    Attributes
    ----------
    layout : Layout
    n : int
        Free coordinates of the layout (hard pins included, held fixed).
    D0 : csr_matrix
        Augmented coboundary on the free coordinates with every hidden unit inactive.
    e : ndarray, shape (n_samples, n_edges)
        Constant edge term ``delta_U u + edge_offset`` of every sample.
    z_index, a_index : ndarray of int, shape (n_hidden_units,)
        Free positions of every hidden ``z_j`` and ``a_j`` (layer by layer).
    ea_rows : ndarray of int
        Edge rows of the activation edges ``e_a`` (same unit order).
    layer, neuron : ndarray of int
        Layer (1-based) and index of every hidden unit.
    P : csr_matrix, shape (n_hidden_units, n)
        ``p_j = (W_l a_(l-1) + b_l)_j = (P omega)_j + p0_j``: the weight-edge force on ``z_j`` at ``z_j = 0``.
    p0 : ndarray, shape (n_samples, n_hidden_units)
    """

    def __init__(self, net, X, reduced, soft, lam):
        lay = Layout.for_network(net, reduced=reduced)
        M = X.shape[0]
        self.layout, self.n = lay, lay.n_free
        k = lay.n_hidden
        units = [(l, j) for l in range(1, k + 1) for j in range(net.dims[l])]
        self.layer = np.array([l for l, _ in units], dtype=np.int64)
        self.neuron = np.array([j for _, j in units], dtype=np.int64)
        self.z_index = np.array([lay.free(lay.z(l)).start + j for l, j in units], dtype=np.int64)
        self.a_index = np.array([lay.free(lay.a(l)).start + j for l, j in units], dtype=np.int64)
        self.ea_rows = np.array([lay.edge("e_" + lay.a(l)).start + j for l, j in units], dtype=np.int64)
        inactive = [np.zeros(d, dtype=bool) for d in net.dims[1:-1]]
        rel = None if lam <= 0 else _pins.Reluctance(lam)
        one = assemble(net, X[:1], pattern=inactive, reduced=reduced, soft_pins=_dummy_soft(soft), reluctance=rel)
        self.D0 = sp.csr_matrix(one.delta_free)
        Db = sp.csr_matrix(one.delta_boundary)
        self.e = self._boundary_vectors(net, X, reduced, soft, lam) @ Db.T + one.edge_offset[None, :]
        self.P, self.p0 = self._weight_forces(net, X, lay, units)

    @staticmethod
    def _boundary_vectors(net, X, reduced, soft, lam):
        """``u`` of every sample, shape (n_samples, n_boundary), in the assembler's own order."""
        M = X.shape[0]
        rel = None if lam <= 0 else lam
        sys_ = assemble(net, X, reduced=reduced, soft_pins=None if not soft.size else _pins.SoftPins(
            {lab: soft.values[:, [i]] for i, lab in enumerate(soft.labels)},
            gamma={lab: float(g) for lab, g in zip(soft.labels, soft.gamma)}), reluctance=rel)
        return sys_.u.reshape(M, -1)

    def _weight_forces(self, net, X, lay, units):
        rows, cols, vals = [], [], []
        p0 = np.zeros((X.shape[0], len(units)))
        for u, (l, j) in enumerate(units):
            W, b = net.weights[l - 1], net.biases[l - 1]
            p0[:, u] = b[j]
            if l == 1:
                p0[:, u] += X @ W[j]
            else:
                a0 = lay.free(lay.a(l - 1)).start
                rows += [u] * W.shape[1]
                cols += list(range(a0, a0 + W.shape[1]))
                vals += list(W[j])
        P = sp.csr_matrix((vals, (rows, cols)), shape=(len(units), self.n))
        return P, p0

    def operator(self, pins):
        """The kernels' :class:`~sheaflinalg.kernels.exact.structs.ExactOperator` with the hard pins ``pins``
        (positions)."""
        held = np.zeros(self.n, dtype=np.bool_)
        held[np.asarray(pins, dtype=np.int64)] = True
        return ExactOperator(*_csr(self.D0), *_csr(self.D0.T), self.ea_rows.astype(np.int64),
                             self.z_index.astype(np.int64), self.a_index.astype(np.int64), held, *_csr(self.P))

    def coboundary(self, active):
        """``D_m`` (CSR) for the unit mask ``active`` (bool, one entry per hidden unit)."""
        on = np.flatnonzero(active)
        R = sp.csr_matrix((-np.ones(on.size), (self.ea_rows[on], self.z_index[on])), shape=self.D0.shape)
        return (self.D0 + R).tocsr()


def _csr(M):
    """``(indptr, indices, data)`` of ``M`` as CSR with sorted indices (int64, float64)."""
    M = sp.csr_matrix(M)
    M.sort_indices()
    return (M.indptr.astype(np.int64), M.indices.astype(np.int64), M.data.astype(np.float64))
