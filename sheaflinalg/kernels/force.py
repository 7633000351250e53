"""The one force routine of the neural sheaf, shared by the heat and training kernels.

Internal layout (samples are columns, so inner loops over samples vectorise):

* ``X``: (n_0, M) inputs.
* ``S``: (n_rows, M) free cochain, rows in the layout's free order
  ``z1, a1, ..., ak, z(k+1)[, yhat]`` (offsets from :class:`~sheaflinalg.layout.Layout`).
* ``theta``: flat parameters, ``W_l`` row-major at ``woff[l]``, ``b_l`` at ``boff[l]``.
* ``E``: (n_rows, M) edge discrepancies ``(delta omega_bar)_e``.  Edge ``e_i``
  pairs with free block ``i`` (the unit-triangular structure), so ``E`` uses
  the same row offsets: ``E[z_l] = z_l - W_l a_(l-1) - b_l``,
  ``E[a_l] = a_l - R_l z_l``, ``E[yhat] = yhat - phi(z(k+1))``.
* ``F``: (n_rows, M) force ``-grad`` of the discord energy (the velocity / alpha).

Layer ``l`` (1-based) has ``dims[l]`` neurons; ``zoff[l]``, ``aoff[l]`` are
row offsets (``aoff[0] = -1``: ``a_0`` is ``X``).

:func:`compute_forces_range` works on a range of samples (kernels sweep big
batches in cache-sized tiles); its sample loops use unsigned indices, which
spares numba's negative-index wraparound test and lets LLVM vectorise them.
"""

import numpy as np
from numba import njit

PHI_CODES = {"identity": 0, "sigmoid": 1, "tanh": 2, "softmax": 3}

OUTPUT_EDGE_NONE = 0          # reduced system: no output edge (identity output)
OUTPUT_EDGE_ADJOINT = 1       # -J_phi(z)^T grad f(phi(z) - yhat) on z(k+1) (local adjoint)
OUTPUT_EDGE_DISCREPANCY = 2   # -grad f(phi(z) - yhat) on z(k+1) (cross-entropy simplification)

LOSS_CODES = {"squared": 0, "l1": 1, "pnorm": 2, "huber": 3}

# Above this many multiply-adds a layer product goes to BLAS; below it the
# hand-written loops (no call overhead) are faster.
BLAS_THRESHOLD = 1 << 16

# Data budget of one tile of samples (its rows of S, E and F): half of a
# 2 MB L2 cache.  Measured on that machine: smaller (L1-sized) tiles lose
# more to loop overheads than they gain, and bigger ones spill to L3.
TILE_BYTES = 1 << 20


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


@njit(cache=True)
def _affine_residual(W, b, A, Z, out):
    """``out = Z - W A - b``: the weight-edge discrepancy."""
    n, m = W.shape
    M = A.shape[1]
    if n * m * M >= BLAS_THRESHOLD:
        np.dot(W, A, out)
        for i in range(n):
            bi = b[i]
            for s in range(M):
                out[i, s] = Z[i, s] - out[i, s] - bi
    else:
        for i in range(n):
            bi = b[i]
            for s in range(M):
                out[i, s] = Z[i, s] - bi
            for j in range(m):
                w = W[i, j]
                for s in range(M):
                    out[i, s] -= w * A[j, s]


@njit(cache=True)
def _add_transpose_product(W, E, out, work):
    """``out += W^T E``."""
    n, m = W.shape
    M = E.shape[1]
    if n * m * M >= BLAS_THRESHOLD:
        buf = work[:m]
        np.dot(W.T, E, buf)
        for j in range(m):
            for s in range(M):
                out[j, s] += buf[j, s]
    else:
        for i in range(n):
            for j in range(m):
                w = W[i, j]
                for s in range(M):
                    out[j, s] += w * E[i, s]


@njit(cache=True)
def _residual_rows(A, ao, S, zo, theta, wo, bo, n, m, E, F, write_force, s0, s1):
    """``E[z] = z - W A - b`` (and ``F[z] = -E[z]`` if ``write_force``) row by row (``A`` rows from ``ao``).

    The arithmetic is ``((z - b) - w_0 a_0) - w_1 a_1 - ...`` in this order on
    every path.  Each loop over the samples stores into one row only: loops
    that store into several rows of possibly aliasing arrays are not
    vectorised by LLVM.  Only the samples ``s0 <= s < s1`` are touched.
    """
    for i in range(n):
        bi = theta[bo + i]
        z = zo + i
        w0 = theta[wo + i * m]
        if m == 1:
            for s in range(np.uint64(s0), np.uint64(s1)):
                E[z, s] = (S[z, s] - bi) - w0 * A[ao, s]
        elif m == 2:
            w1 = theta[wo + i * m + 1]
            for s in range(np.uint64(s0), np.uint64(s1)):
                E[z, s] = ((S[z, s] - bi) - w0 * A[ao, s]) - w1 * A[ao + 1, s]
        elif m == 3:
            w1 = theta[wo + i * m + 1]
            w2 = theta[wo + i * m + 2]
            for s in range(np.uint64(s0), np.uint64(s1)):
                E[z, s] = (((S[z, s] - bi) - w0 * A[ao, s]) - w1 * A[ao + 1, s]) - w2 * A[ao + 2, s]
        else:
            for s in range(np.uint64(s0), np.uint64(s1)):
                E[z, s] = (S[z, s] - bi) - w0 * A[ao, s]
            # Four source rows per pass (same order of operations): the
            # output row is loaded and stored a quarter as often.
            j = 1
            while j + 4 <= m:
                w1 = theta[wo + i * m + j]
                w2 = theta[wo + i * m + j + 1]
                w3 = theta[wo + i * m + j + 2]
                w4 = theta[wo + i * m + j + 3]
                for s in range(np.uint64(s0), np.uint64(s1)):
                    E[z, s] = ((((E[z, s] - w1 * A[ao + j, s]) - w2 * A[ao + j + 1, s])
                                - w3 * A[ao + j + 2, s]) - w4 * A[ao + j + 3, s])
                j += 4
            while j < m:
                w = theta[wo + i * m + j]
                for s in range(np.uint64(s0), np.uint64(s1)):
                    E[z, s] -= w * A[ao + j, s]
                j += 1
        if write_force:
            for s in range(np.uint64(s0), np.uint64(s1)):
                F[z, s] = -E[z, s]


@njit(cache=True)
def compute_forces(X, S, theta, dims, zoff, aoff, woff, boff, yhat_off,
                   out_mode, phi_code, loss_kind, loss_param, F, E, phi_buf, work):
    """Edge discrepancies ``E`` and forces ``F = -grad (discord energy)`` of the state ``S``.

    The hidden masks are ``R_l = (z_l >= 0)`` of ``S``.  ``yhat_off`` is the
    row offset of ``yhat`` (ignored when ``out_mode == OUTPUT_EDGE_NONE``);
    ``phi_buf`` is (n_out, M) and receives ``phi(z(k+1))``; ``work`` is a
    (max width, M) scratch buffer.  All samples; see :func:`compute_forces_range`.
    """
    compute_forces_range(X, S, theta, dims, zoff, aoff, woff, boff, yhat_off,
                         out_mode, phi_code, loss_kind, loss_param, F, E, phi_buf, work, 0, S.shape[1])


@njit(cache=True)
def tile_width(dims, n_rows, M):
    """Samples per tile for kernels that sweep the batch tile by tile (``M``: one tile).

    A tile's rows of ``S``, ``E`` and ``F`` should stay in the L2 cache
    (``TILE_BYTES``).  One tile when the batch fits, or when some layer
    product of a tile would still go to BLAS (the BLAS path of
    :func:`compute_forces_range` needs the whole batch).  Thin products
    (e.g. two inputs) of big batches thus run as tiles of hand-written
    loops, which measured faster than BLAS on the whole batch.
    """
    t = (TILE_BYTES // (24 * n_rows)) // 8 * 8
    if t < 64:
        t = 64
    if t >= M:
        return M
    for l in range(1, dims.shape[0]):
        if dims[l] * dims[l - 1] * t >= BLAS_THRESHOLD:
            return M
    return t


@njit(cache=True)
def compute_forces_range(X, S, theta, dims, zoff, aoff, woff, boff, yhat_off,
                         out_mode, phi_code, loss_kind, loss_param, F, E, phi_buf, work, s0, s1):
    """:func:`compute_forces` restricted to the samples (columns) ``s0 <= s < s1``.

    Samples are independent, so sweeping the batch in tiles gives exactly
    the same ``E`` and ``F`` as one call on all samples.  Layer products
    above ``BLAS_THRESHOLD`` go to BLAS only when the range is the whole
    batch (hand-written loops otherwise: same results up to the order of
    the floating-point sums).
    """
    n_layers = dims.shape[0] - 1
    k = n_layers - 1
    M = S.shape[1]
    whole = s0 == 0 and s1 == M
    # Rows are addressed by offset (no per-call array views): for small
    # networks and one sample the view bookkeeping would dominate.
    # Edge discrepancies and the diagonal part of each force.
    # Inner loops store into one row each (see _residual_rows), and the force
    # rows are written in as few passes as possible with the same arithmetic:
    # F[z_l] = -E[z_l] + R E[a_l],  F[a_l] = -E[a_l] + sum_i W_{l+1}[i] E[z_{l+1}, i].
    for l in range(1, n_layers + 1):
        n = dims[l]
        m = dims[l - 1]
        zo = zoff[l]
        wo = woff[l]
        bo = boff[l]
        hidden = l <= k
        if whole and n * m * M >= BLAS_THRESHOLD:
            W = theta[wo:wo + n * m].reshape(n, m)
            A = X if l == 1 else S[aoff[l - 1]:aoff[l - 1] + m]
            _affine_residual(W, theta[bo:bo + n], A, S[zo:zo + n], E[zo:zo + n])
            if not hidden:
                for i in range(n):
                    for s in range(np.uint64(s0), np.uint64(s1)):
                        F[zo + i, s] = -E[zo + i, s]
        elif l == 1:
            _residual_rows(X, 0, S, zo, theta, wo, bo, n, m, E, F, not hidden, s0, s1)
        else:
            _residual_rows(S, aoff[l - 1], S, zo, theta, wo, bo, n, m, E, F, not hidden, s0, s1)
        if hidden:
            # Activation edge e = a - R z.
            ao = aoff[l]
            # One pass for both rows (two stores still vectorise; three do not).
            for i in range(n):
                for s in range(np.uint64(s0), np.uint64(s1)):
                    z = S[zo + i, s]
                    r = np.float64(z >= 0)
                    ea = S[ao + i, s] - r * z
                    E[ao + i, s] = ea
                    F[zo + i, s] = -E[zo + i, s] + r * ea
    # Weight edges pull the upstream activations: F[a_l] = -E[a_l] + W_{l+1}^T E[z_{l+1}].
    for l in range(1, k + 1):
        n = dims[l + 1]
        m = dims[l]
        wo = woff[l + 1]
        zo = zoff[l + 1]
        ao = aoff[l]
        if whole and n * m * M >= BLAS_THRESHOLD:
            for j in range(m):
                for s in range(np.uint64(s0), np.uint64(s1)):
                    F[ao + j, s] = -E[ao + j, s]
            W = theta[wo:wo + n * m].reshape(n, m)
            _add_transpose_product(W, E[zo:zo + n], F[ao:ao + m], work)
        else:
            for j in range(m):
                w = theta[wo + j]
                for s in range(np.uint64(s0), np.uint64(s1)):
                    F[ao + j, s] = -E[ao + j, s] + w * E[zo, s]
            # Row j accumulates i = 1, 2, ... in order, four rows of E per pass.
            for j in range(m):
                i = 1
                while i + 4 <= n:
                    w1 = theta[wo + i * m + j]
                    w2 = theta[wo + (i + 1) * m + j]
                    w3 = theta[wo + (i + 2) * m + j]
                    w4 = theta[wo + (i + 3) * m + j]
                    for s in range(np.uint64(s0), np.uint64(s1)):
                        F[ao + j, s] = ((((F[ao + j, s] + w1 * E[zo + i, s]) + w2 * E[zo + i + 1, s])
                                         + w3 * E[zo + i + 2, s]) + w4 * E[zo + i + 3, s])
                    i += 4
                while i < n:
                    w = theta[wo + i * m + j]
                    for s in range(np.uint64(s0), np.uint64(s1)):
                        F[ao + j, s] += w * E[zo + i, s]
                    i += 1
    if out_mode == OUTPUT_EDGE_NONE:
        return
    n = dims[n_layers]
    zo = zoff[n_layers]
    apply_phi_range(phi_code, S, zo, n, phi_buf, s0, s1)
    # g = grad f(phi(z) - yhat) goes to F's yhat rows (the force on yhat);
    # rows outer, samples inner, so that the loops vectorise.
    for i in range(n):
        for s in range(np.uint64(s0), np.uint64(s1)):
            d = phi_buf[i, s] - S[yhat_off + i, s]
            E[yhat_off + i, s] = -d
            F[yhat_off + i, s] = loss_gradient(loss_kind, loss_param, d)
    if out_mode == OUTPUT_EDGE_DISCREPANCY or phi_code == 0:
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
def discord_by_edge_block(E, edge_offsets, edge_sizes, yhat_off, loss_kind, loss_param, out):
    """``out[i, s]`` = discord of edge block ``i`` for sample ``s``: ``1/2 ||E_e||^2``.

    The output edge (rows from ``yhat_off``, ``-1`` when absent) uses the
    loss potential ``f`` instead of ``1/2 d^2``.
    """
    M = E.shape[1]
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
