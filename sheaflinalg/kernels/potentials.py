"""Potentials of the neural sheaf's edges: the output activation ``phi``, the output edge's potential ``f``
and its gradient, the output edge's terms in the force, and the discord of every edge block.

Same internal layout as :mod:`sheaflinalg.kernels.force` (samples are columns); the output edge is
described by :class:`~sheaflinalg.kernels.structs.OutputEdge` (``mode``: one of ``OUTPUT_EDGE_*``,
``phi_code``: :data:`PHI_CODES`, ``loss_kind``: :data:`LOSS_CODES`).
"""

import numpy as np
from numba import njit

from .fastmath import FMA

PHI_CODES = {"identity": 0, "sigmoid": 1, "tanh": 2, "softmax": 3}

OUTPUT_EDGE_NONE = 0          # reduced system: no output edge (identity output)
OUTPUT_EDGE_ADJOINT = 1       # -J_phi(z)^T grad f(phi(z) - yhat) on z(k+1) (local adjoint)
OUTPUT_EDGE_DISCREPANCY = 2   # -grad f(phi(z) - yhat) on z(k+1) (cross-entropy simplification)

LOSS_CODES = {"squared": 0, "l1": 1, "pnorm": 2, "huber": 3}


@njit(cache=True)
def apply_phi(code, Z, out):
    """``out = phi(Z)`` column by column (``Z`` is (n_out, M))."""
    apply_phi_range(code, Z, 0, Z.shape[0], out, 0, Z.shape[1])


@njit(cache=True)
def apply_phi_range(code, Z, zo, n, out, s0, s1):
    """``out[:, s] = phi(Z[zo:zo + n, s])`` for the samples ``s0 <= s < s1``."""
    if code == 0:
        for i in range(n):
            for s in range(np.uint64(s0), np.uint64(s1)):
                out[i, s] = Z[zo + i, s]
    elif code == 1:
        for i in range(n):
            for s in range(np.uint64(s0), np.uint64(s1)):
                v = Z[zo + i, s]
                if v >= 0:
                    out[i, s] = 1.0 / (1.0 + np.exp(-v))
                else:
                    e = np.exp(v)
                    out[i, s] = e / (1.0 + e)
    elif code == 2:
        for i in range(n):
            for s in range(np.uint64(s0), np.uint64(s1)):
                out[i, s] = np.tanh(Z[zo + i, s])
    else:
        for s in range(np.uint64(s0), np.uint64(s1)):
            m = Z[zo, s]
            for i in range(1, n):
                if Z[zo + i, s] > m:
                    m = Z[zo + i, s]
            total = 0.0
            for i in range(n):
                e = np.exp(Z[zo + i, s] - m)
                out[i, s] = e
                total += e
            for i in range(n):
                out[i, s] /= total


@njit(cache=True)
def loss_gradient(kind, param, d):
    """Componentwise gradient of the output-edge potential ``f`` at discrepancy ``d``."""
    if kind == 0:
        return d
    if kind == 1:
        return 1.0 if d > 0 else (-1.0 if d < 0 else 0.0)
    if kind == 2:
        return np.abs(d) ** (param - 2.0) * d if d != 0 else 0.0
    if d > param:
        return param
    if d < -param:
        return -param
    return d


@njit(cache=True)
def loss_potential(kind, param, d):
    """Componentwise output-edge potential ``f(d)``."""
    if kind == 0:
        return 0.5 * d * d
    if kind == 1:
        return np.abs(d)
    if kind == 2:
        return np.abs(d) ** param / param
    if np.abs(d) <= param:
        return 0.5 * d * d
    return param * (np.abs(d) - 0.5 * param)


@njit(cache=True, fastmath=FMA)
def output_edge_forces(S, F, E, lo, yhat_off, edge, phi_buf, s0, s1):
    """Output-edge terms of the output layer ``lo``: ``E[yhat]``, ``F[yhat] = grad f(phi(z) - yhat)`` and its
    pull onto ``F[z(k+1)]`` (``yhat`` at the row ``yhat_off``)."""
    if edge.mode == OUTPUT_EDGE_NONE:
        return
    zo = lo.zo
    n = lo.n
    phi_code = edge.phi_code
    loss_kind = edge.loss_kind
    loss_param = edge.loss_param
    apply_phi_range(phi_code, S, zo, n, phi_buf, s0, s1)
    # g = grad f(phi(z) - yhat) goes to F's yhat rows (the force on yhat);
    # rows outer, samples inner, so that the loops vectorise.
    for i in range(n):
        for s in range(np.uint64(s0), np.uint64(s1)):
            d = phi_buf[i, s] - S[yhat_off + i, s]
            E[yhat_off + i, s] = -d
            F[yhat_off + i, s] = loss_gradient(loss_kind, loss_param, d)
    if edge.mode == OUTPUT_EDGE_DISCREPANCY or phi_code == 0:
        for i in range(n):
            for s in range(np.uint64(s0), np.uint64(s1)):
                F[zo + i, s] -= F[yhat_off + i, s]
    elif phi_code == 3:
        for s in range(np.uint64(s0), np.uint64(s1)):
            dot = 0.0
            for i in range(n):
                dot += phi_buf[i, s] * F[yhat_off + i, s]
            for i in range(n):
                F[zo + i, s] -= phi_buf[i, s] * (F[yhat_off + i, s] - dot)
    elif phi_code == 1:
        for i in range(n):
            for s in range(np.uint64(s0), np.uint64(s1)):
                y = phi_buf[i, s]
                F[zo + i, s] -= y * (1.0 - y) * F[yhat_off + i, s]
    else:
        for i in range(n):
            for s in range(np.uint64(s0), np.uint64(s1)):
                y = phi_buf[i, s]
                F[zo + i, s] -= (1.0 - y * y) * F[yhat_off + i, s]


@njit(cache=True)
def discord_by_edge_block(E, lay, edge, out):
    """``out[i, s]`` = discord of edge block ``i`` for sample ``s``: ``1/2 ||E_e||^2``.

    The output edge (rows from ``lay.yhat_off``, ``-1`` when absent) uses the
    loss potential ``f`` of ``edge`` instead of ``1/2 d^2``.

    Parameters
    ----------
    E : ndarray, shape (n_rows, M)
        Edge discrepancies.
    lay : KernelLayout
    edge : OutputEdge
    out : ndarray, shape (n_blocks, M)
        Receives the discord.
    """
    M = E.shape[1]
    edge_offsets, edge_sizes, yhat_off = lay.edge_offsets, lay.edge_sizes, lay.yhat_off
    loss_kind, loss_param = edge.loss_kind, edge.loss_param
    for blk in range(edge_offsets.shape[0]):
        o = edge_offsets[blk]
        for s in range(M):
            total = 0.0
            if o == yhat_off:
                for i in range(edge_sizes[blk]):
                    total += loss_potential(loss_kind, loss_param, E[o + i, s])
            else:
                for i in range(edge_sizes[blk]):
                    total += 0.5 * E[o + i, s] * E[o + i, s]
            out[blk, s] = total
