"""The structural stagnation bound of section 5.3: how far the weights can move while the state relaxes.

``max ||theta(t) - theta(0)|| <= beta B_omega D_0 / (alpha lambda_eff)`` with
``D_0`` the initial disagreement, ``B_omega`` a bound on the extended cochain
and ``lambda_eff`` the spectral gap of the training sheaf's Laplacian on the
moving stalks (:func:`effective_spectral_gap`).
"""

import numpy as np
import scipy.sparse.linalg as spla

from ...network.model import Network
from ...sheaf.assembled.assembly import assemble

MAX_SIZE = 400_000          # "auto" computes lambda_eff up to this many moving coordinates
DENSE_GAP_MAX = 20_000_000  # batched dense eigvalsh up to this many block entries, else ARPACK


def start(stag, alpha, beta, disagreement, state_norm):
    """Fill the run-independent entries of ``history.stagnation`` at the initial state."""
    stag.update(alpha=alpha, beta=beta, initial_disagreement=disagreement, B_omega=state_norm,
                lambda_eff=None, bound=None, max_displacement=0.0, holds=None)


def wanted(mode, n_moving):
    """Whether to compute ``lambda_eff``: ``mode`` is True, False or "auto" (small enough batches)."""
    return mode is True or (mode == "auto" and n_moving <= MAX_SIZE)


def finish(stag, weight_displacement):
    """The bound and whether it held, from the recorded weight displacements."""
    stag["max_displacement"] = max(weight_displacement)
    if stag["lambda_eff"]:
        stag["bound"] = (stag["beta"] * stag["B_omega"] * stag["initial_disagreement"]
                         / (stag["alpha"] * stag["lambda_eff"]))
        stag["holds"] = bool(stag["max_displacement"] <= stag["bound"])


def effective_spectral_gap(net, X, state_rows, layout):
    """Smallest eigenvalue of the training sheaf's Laplacian on the moving stalks.

    The Laplacian is ``delta'^T delta'`` with the output vertex pinned and the
    output edge taken as the identity (as in the cross-entropy dynamics),
    the ReLU masks ``z >= 0`` of ``state_rows``; the batch is block diagonal
    so this is the minimum over samples.  It is the ``lambda_eff`` of the
    structural stagnation bound (section 5.3).

    Blocks are solved one sample at a time (batched dense ``eigvalsh`` in
    chunks while a sample's block is small, else ARPACK shift-invert on that
    sample's sparse block): ARPACK on the whole block-diagonal matrix meets the
    same eigenvalue once per repeated sample and may then fail to converge.
    """
    M = X.shape[0]
    n_free = layout.n_free
    keep = np.ones(n_free, dtype=bool)
    keep[layout.free("yhat")] = False
    n_move = int(keep.sum())
    if n_free * n_move <= DENSE_GAP_MAX:
        chunk = max(1, DENSE_GAP_MAX // (n_free * n_move))
        return min(_dense_gap(net, state_rows[i:i + chunk], layout, n_move)
                   for i in range(0, M, chunk))
    lin = Network(net.weights, net.biases, "identity")
    pattern = [state_rows[:, layout.free(layout.z(l))] >= 0 for l in range(1, net.n_hidden + 1)]
    L = assemble(lin, X, pattern=pattern).laplacian_free.tocsr()
    L.sum_duplicates()
    moving = np.flatnonzero(keep)
    blocks = (s * n_free + moving for s in range(M))
    return min(_sparse_gap(L[idx][:, idx].tocsc()) for idx in blocks)


def _dense_gap(net, state_rows, layout, n_move):
    """Smallest eigenvalue over a chunk of samples, from their dense coboundaries."""
    # Per-sample coboundary on the moving stalks, written from the layout's
    # blocks: edge e pairs with free block e (unit-triangular order), the
    # output edge (rows of yhat) sees z(k+1) through the identity.
    D = np.zeros((state_rows.shape[0], layout.n_free, n_move))
    for l in range(1, net.n_hidden + 2):
        z = layout.free(layout.z(l))
        D[:, z, z] = np.eye(z.stop - z.start)
        if l > 1:
            D[:, z, layout.free(layout.a(l - 1))] = -net.weights[l - 1]
        if l <= net.n_hidden:
            a = layout.free(layout.a(l))
            D[:, a, a] = np.eye(a.stop - a.start)
            mask = (state_rows[:, z] >= 0).astype(np.float64)
            D[:, a, z] = -mask[:, :, None] * np.eye(z.stop - z.start)
    D[:, layout.free("yhat"), z] = -np.eye(z.stop - z.start)
    L = np.matmul(D.transpose(0, 2, 1), D)
    return float(np.linalg.eigvalsh(L)[:, 0].min())


def _sparse_gap(L):
    """Smallest eigenvalue of one sample's positive definite block by ARPACK shift-invert."""
    n = L.shape[0]
    try:
        return float(spla.eigsh(L, k=1, sigma=0.0, which="LM", return_eigenvectors=False)[0])
    except spla.ArpackNoConvergence:
        val = spla.eigsh(L, k=1, sigma=0.0, which="LM", ncv=min(n - 1, 64), maxiter=100 * n,
                         return_eigenvectors=False)
        return float(val[0])
