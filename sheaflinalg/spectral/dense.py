"""Small systems: every sample's Laplacian as a dense matrix, diagonalised in one batched ``eigh``."""

import numpy as np

from .._common.blocks import map_blocks
from .._common.threads import blas_limit
from .result import fix_signs


def dense_laplacians(net, masks, jacobians, layout, M):
    """``L[Omega, Omega]`` of every sample as a dense (M, N, N) array (small-N path only)."""
    k = net.n_hidden
    N = layout.n_free
    D0 = np.eye(N)
    for l in range(1, k + 1):
        D0[layout.free(layout.z(l + 1)), layout.free(layout.a(l))] = -net.weights[l]
    L0 = D0.T @ D0  # mask-independent part (masks enter only through e_a rows)
    L = np.broadcast_to(L0, (M, N, N)).copy()
    for l in range(1, k + 1):
        zi = np.arange(layout.free(layout.z(l)).start, layout.free(layout.z(l)).stop)
        ai = np.arange(layout.free(layout.a(l)).start, layout.free(layout.a(l)).stop)
        m = masks[l - 1].astype(np.float64)
        L[:, zi, zi] += m
        L[:, zi, ai] -= m
        L[:, ai, zi] -= m
    if jacobians is not None:
        zk = layout.free(layout.z(k + 1))
        yh = layout.free("yhat")
        for s, J in enumerate(jacobians):
            J = np.diag(J) if J.ndim == 1 else J
            L[s, zk, zk] += J.T @ J
            L[s, zk, yh] -= J.T
            L[s, yh, zk] -= J
    return L


# The batch is cut into chunks of this many matrices whatever the thread count
# (every matrix is diagonalised on its own, so the cut does not change results).
CHUNK = 16


def dense_extremes(L, k, vectors, full, threads=1):
    """Batched dense eigensolver; with ``threads > 1`` chunks of the batch run in a thread pool
    (LAPACK releases the GIL), each with a serial BLAS.

    Returns ``(smallest, largest, vectors_smallest, vectors_largest, eigenvalues, residuals)``.
    """
    with blas_limit(1):
        chunks = [L[i:i + CHUNK] for i in range(0, L.shape[0], CHUNK)]
        if threads < 2 or len(chunks) < 2:
            return _dense_extremes_serial(L, k, vectors, full)
        parts = map_blocks(lambda A: _dense_extremes_serial(A, k, vectors, full), chunks, threads)
    return tuple(None if parts[0][i] is None else np.concatenate([p[i] for p in parts]) for i in range(6))


def _dense_extremes_serial(L, k, vectors, full):
    if vectors:
        w, V = np.linalg.eigh(L)
        Vs = fix_signs(np.swapaxes(V[:, :, :k], 1, 2))
        Vl = fix_signs(np.swapaxes(V[:, :, ::-1][:, :, :k], 1, 2))
        ws, wl = w[:, :k], w[:, ::-1][:, :k]
        res_s = (np.linalg.norm(np.einsum("sij,skj->ski", L, Vs) - ws[:, :, None] * Vs, axis=2) / ws).max(axis=1)
        res_l = (np.linalg.norm(np.einsum("sij,skj->ski", L, Vl) - wl[:, :, None] * Vl, axis=2) / wl).max(axis=1)
        residuals = np.stack([res_s, res_l], axis=1)
    else:
        w = np.linalg.eigvalsh(L)
        Vs = Vl = None
        residuals = np.zeros((L.shape[0], 2))
    return (w[:, :k], w[:, ::-1][:, :k], Vs, Vl, w if full else None, residuals)
