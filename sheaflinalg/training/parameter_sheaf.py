"""The parameter sheaf ``H^W`` of appendix C.1, assembled as sparse matrices.

Fix a batch cochain ``omega_bar`` of the neural sheaf.  On each weight edge
``e_zl = v_a(l-1) -> v_zl`` the parameter sheaf has two vertex components,
``rho_up`` in ``Hom(F(v_a(l-1)), F(e)) = R^(n_l x (n_(l-1) + n_l))`` (the
slot of the extended weight ``[W_l  diag(b_l)]``) and ``rho_down`` in
``Hom(F(v_zl), F(e)) = R^(n_l x n_l)`` (the slot of the identity), and its
restriction maps evaluate them at the current stalks (eq.
structure-restriction)::

    (delta^H rho)_(e, s) = rho_down z_l[s] - rho_up abar_(l-1)[s],

one edge stalk per sample ``s`` (activation and output edges have trivial
stalks in ``H^W``).  At ``rho`` = the current maps, ``delta^H rho`` is the
weight-edge part of ``delta omega_bar``, and the projected Laplacian action
``-Pi_W(L_H rho)`` is the weight velocity of the joint dynamics per unit
``beta`` (eq. structure-diffusion).

Coordinates of ``rho``: for ``l = 1..k+1``, ``rho_up`` row-major then
``rho_down`` row-major.  Rows of ``delta^H``: for each weight edge, sample
by sample, ``n_l`` rows.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._common.validation import as_float64, as_samples
from ..sheaf.layout import Layout
from ..sheaf.state import to_columns


@dataclass
class ParameterSheaf:
    """The assembled parameter sheaf of a network at a batch cochain.

    Attributes
    ----------
    coboundary : scipy.sparse.csr_matrix
        ``delta^H`` (weight-edge stalks of every sample x parameter coordinates).
    laplacian : scipy.sparse.csr_matrix
        ``L_H = delta^H^T delta^H``.
    rho : ndarray
        The current restriction maps as a parameter 0-cochain.
    trainable : ndarray of int
        Position in ``rho`` of each entry of the flat parameter vector
        ``net.parameters()`` (``W_l`` entries and the diagonal of the bias
        block), so ``x[trainable]`` is ``Pi_W x`` in parameter order.
    labels : list of str
        One label per ``rho`` coordinate, e.g. ``"up2[0,3]"``.
    """

    coboundary: sp.csr_matrix
    laplacian: sp.csr_matrix
    rho: np.ndarray
    trainable: np.ndarray
    labels: list

    def projected_action(self, rho=None):
        """``Pi_W(L_H rho)`` in the order of ``net.parameters()`` (default ``rho``: the current maps)."""
        rho = self.rho if rho is None else rho
        return (self.laplacian @ rho)[self.trainable]


def parameter_sheaf(net, X, state):
    """Assemble ``delta^H`` and ``L_H`` of the parameter sheaf at the batch cochain ``state``.

    Parameters
    ----------
    net : Network
    X : array_like, shape (n_samples, n_0)
    state : array_like, shape (n_samples, n_free)
        Free cochain in the order of ``Layout(net.dims)`` (``yhat`` optional: unused).

    Returns
    -------
    ParameterSheaf

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> from sheaflinalg.training.parameter_sheaf import parameter_sheaf
    >>> net = sl.Network.random([2, 3, 1], seed=0)
    >>> X = np.ones((4, 2))
    >>> h = parameter_sheaf(net, X, sl.harmonic_extension(net, X).free)
    >>> bool(np.allclose(h.coboundary @ h.rho, 0))   # the forward pass is a global section
    True
    """
    X, _ = as_samples(X, net.dims[0])
    layout = Layout.for_network(net)
    S = as_float64(state, "state")
    M = X.shape[0]
    n_rows = layout.kernel_offsets().yhat_off
    if S.ndim != 2 or S.shape[0] != M or S.shape[1] not in (n_rows, layout.n_free):
        raise ValueError(f"state must have shape ({M}, {layout.n_free}) (or ({M}, {n_rows}) without yhat), "
                         f"got {S.shape}")
    cols = to_columns(S)
    dims = net.dims
    off = layout.kernel_offsets()
    rows_i, cols_i, vals = [], [], []
    rho_parts, labels, trainable = [], [], np.empty(off.n_parameters, dtype=np.int64)
    row0 = col0 = 0
    for l in range(1, len(dims)):
        n, m = dims[l], dims[l - 1]
        up_w = m + n                       # [a_(l-1); 1_(n_l)]
        a_prev = X.T if l == 1 else cols[layout.free(layout.a(l - 1))]
        abar = np.vstack([a_prev, np.ones((n, M))])          # (up_w, M)
        z = cols[layout.free(layout.z(l))]                         # (n, M)
        up0, down0 = col0, col0 + n * up_w
        # Row (s, i) of this edge: -sum_j rho_up[i, j] abar[j, s] + sum_j rho_down[i, j] z[j, s].
        s_idx, i_idx, j_idx = np.meshgrid(np.arange(M), np.arange(n), np.arange(up_w), indexing="ij")
        rows_i.append((row0 + s_idx * n + i_idx).ravel())
        cols_i.append((up0 + i_idx * up_w + j_idx).ravel())
        vals.append((-abar.T[s_idx, j_idx]).ravel())
        s_idx, i_idx, j_idx = np.meshgrid(np.arange(M), np.arange(n), np.arange(n), indexing="ij")
        rows_i.append((row0 + s_idx * n + i_idx).ravel())
        cols_i.append((down0 + i_idx * n + j_idx).ravel())
        vals.append(z.T[s_idx, j_idx].ravel())
        W, b = net.weights[l - 1], net.biases[l - 1]
        rho_parts += [np.hstack([W, np.diag(b)]).ravel(), np.eye(n).ravel()]
        labels += [f"up{l}[{i},{j}]" for i in range(n) for j in range(up_w)]
        labels += [f"down{l}[{i},{j}]" for i in range(n) for j in range(n)]
        ii, jj = np.meshgrid(np.arange(n), np.arange(m), indexing="ij")
        trainable[off.woff[l]:off.woff[l] + n * m] = (up0 + ii * up_w + jj).ravel()
        trainable[off.boff[l]:off.boff[l] + n] = up0 + np.arange(n) * up_w + m + np.arange(n)
        row0 += M * n
        col0 = down0 + n * n
    delta = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows_i), np.concatenate(cols_i))),
                          shape=(row0, col0))
    return ParameterSheaf(delta, (delta.T @ delta).tocsr(), np.concatenate(rho_parts), trainable, labels)
