"""Block products and substitutions with the restricted coboundary ``delta_Omega`` of one sample.

``delta_Omega`` is square and block unit lower triangular (paper eq.
delta-omega-k1, Lemma det1).  In the layout's free order
``z1, a1, ..., ak, z(k+1)[, yhat]``, with edge block ``i`` stored at the rows
of free block ``i`` (as in :mod:`sheaflinalg.kernels.force`):

* ``(delta v)[z1]       = v[z1]``
* ``(delta v)[a_l]      = v[a_l] - R_l v[z_l]``
* ``(delta v)[z_(l+1)]  = v[z_(l+1)] - W_(l+1) v[a_l]``
* ``(delta v)[yhat]     = v[yhat] - J v[z(k+1)]`` (unreduced systems only)

``L[Omega, Omega] v = delta^T (delta v)`` takes one pass over each weight
matrix: row ``r`` of ``W_(l+1)`` gives entry ``r`` of ``delta v`` and, at
once, its contribution to ``delta^T``.  ``L^{-1} w = delta^{-1} (delta^{-T} w)``
is one block backward substitution (``W^T`` products, last layer first) and
one block forward substitution (``W`` products, first layer first): two
passes, no factorisation.  The two passes of ``L^{-1}`` cannot be merged: the
forward product ``W_(l+1) x`` needs ``x = out[a_l]``, which is only known once
the backward product ``W_(l+1)^T y`` is complete.

:func:`backward_sweep` applies ``L`` to one vector and ``delta^{-T}`` to
another in the same passes, and :func:`forward_sweep` then finishes
``L^{-1}``.  That is what the two ARPACK problems of a spectrum (the largest
eigenvalues of ``L`` and of ``L^{-1}``) ask for at every step: the pass of
``L`` rides along with the backward pass of ``L^{-1}``, so the pair streams
every weight matrix twice instead of three times (the passes are bound by
memory bandwidth, not arithmetic).  The rows of every big matrix are split
into a fixed number of blocks (:func:`row_blocks`, set by the matrix's size
alone) that several cores can take (``*_parallel``); the ``W^T`` products
accumulate one partial vector per block and add the partials in block order.
The serial versions split the same way, so the results do not depend on the
number of threads.

The masks cannot prune ``W``: a dead neuron only removes the ``R_l``
coupling.  In ``delta^{-1} w``, ``out[a_l] = w[a_l] + R_l out[z_l]`` equals
``w[a_l]`` for a dead neuron, which is not zero for a general ``w`` (the
Lanczos vectors), so every column of ``W_(l+1)`` is needed; likewise every
row in the ``W^T`` products.

Every kernel releases the GIL (``nogil``).  Shared arguments: ``weights`` a
``numba.typed.List`` of the weight matrices (``weights[l - 1]`` is ``W_l``,
C-contiguous, no copy), ``dims``, ``zoff``, ``aoff`` (from
:meth:`sheaflinalg.sheaf.layout.Layout.kernel_offsets`), ``mask`` (free-vector
length; the ReLU mask ``R_l`` sits at the rows of ``z_l``), ``J`` the
(n_out, n_out) linearised output map and ``yhat_off`` (``-1`` when reduced).
"""

from numba import njit, prange

from . import renamed

# Reassociation lets LLVM vectorise the dot products (a fixed SIMD summation
# order: deterministic on a given machine); no other fast-math flag is used.
_FM = {"reassoc", "contract"}
# Row blocks of a weight matrix: one per BLOCK_ENTRIES entries, at most
# MAX_BLOCKS.  Matrices with fewer than 2 * BLOCK_ENTRIES entries are one
# block and run on one thread (waking a thread costs more than half a small
# pass); MAX_BLOCKS bounds the partial vectors (and the cache they take).
BLOCK_ENTRIES = 32_768
MAX_BLOCKS = 8
PARALLEL_MIN = 2 * BLOCK_ENTRIES


# The row kernels below work on rows r0 <= r < r1 of W and take four rows at a
# time, so that every load of x (or of the accumulator) serves four rows: the
# passes stay close to the memory bandwidth of streaming W once.

@njit(cache=True, nogil=True, fastmath=_FM)
def _dot4(w0, w1, w2, w3, x):
    """The four dot products ``w_i . x``."""
    s0 = s1 = s2 = s3 = 0.0
    for j in range(x.shape[0]):
        xj = x[j]
        s0 += w0[j] * xj
        s1 += w1[j] * xj
        s2 += w2[j] * xj
        s3 += w3[j] * xj
    return s0, s1, s2, s3


@njit(cache=True, nogil=True, fastmath=_FM)
def _add4(out, c0, c1, c2, c3, w0, w1, w2, w3):
    """``out += c0 w0 + c1 w1 + c2 w2 + c3 w3``."""
    for j in range(out.shape[0]):
        out[j] += c0 * w0[j] + c1 * w1[j] + c2 * w2[j] + c3 * w3[j]


@njit(cache=True, nogil=True, fastmath=_FM)
def _dot1(w0, x):
    s0 = 0.0
    for j in range(x.shape[0]):
        s0 += w0[j] * x[j]
    return s0


@njit(cache=True, nogil=True, fastmath=_FM)
def _add1(out, c0, w0):
    for j in range(out.shape[0]):
        out[j] += c0 * w0[j]


@njit(cache=True, nogil=True, fastmath=_FM)
def _backward_rows(W, va, vz, dz, p, yz, q, do_L, do_inv, r0, r1):
    """One pass over rows ``r0:r1`` of ``W`` for the backward sweep.

    ``do_L``: ``dz = vz - W va`` and ``p -= W^T dz`` (the rows' share of
    ``L v``); ``do_inv``: ``q += W^T yz`` (their share of ``delta^{-T} w``).
    With both, each block of rows is read from memory once for the two (the
    second use finds it in the L1 cache).
    """
    r = r0
    while r + 4 <= r1:
        w0, w1, w2, w3 = W[r], W[r + 1], W[r + 2], W[r + 3]
        if do_L:
            s0, s1, s2, s3 = _dot4(w0, w1, w2, w3, va)
            t0, t1, t2, t3 = vz[r] - s0, vz[r + 1] - s1, vz[r + 2] - s2, vz[r + 3] - s3
            dz[r], dz[r + 1], dz[r + 2], dz[r + 3] = t0, t1, t2, t3
            _add4(p, -t0, -t1, -t2, -t3, w0, w1, w2, w3)
        if do_inv:
            _add4(q, yz[r], yz[r + 1], yz[r + 2], yz[r + 3], w0, w1, w2, w3)
        r += 4
    while r < r1:
        w0 = W[r]
        if do_L:
            t0 = vz[r] - _dot1(w0, va)
            dz[r] = t0
            _add1(p, -t0, w0)
        if do_inv:
            _add1(q, yz[r], w0)
        r += 1


@njit(cache=True, nogil=True, fastmath=_FM)
def _product_rows(W, x, base, out, r0, r1):
    """``out = base + W x`` on rows ``r0:r1``, last rows first.

    The backward pass before it has just streamed ``W`` first row first, so
    its last rows are still in this core's L2 cache: starting there reads part
    of ``W`` from L2 instead of L3/memory.  Rows are independent, so the order
    does not change the result.
    """
    r = r1
    while (r - r0) % 4:
        r -= 1
        out[r] = base[r] + _dot1(W[r], x)
    while r >= r0 + 4:
        r -= 4
        s0, s1, s2, s3 = _dot4(W[r], W[r + 1], W[r + 2], W[r + 3], x)
        out[r], out[r + 1], out[r + 2], out[r + 3] = base[r] + s0, base[r + 1] + s1, base[r + 2] + s2, base[r + 3] + s3


@njit(cache=True, nogil=True)
def row_blocks(m, n, block_entries):
    """Number of row blocks of an ``m x n`` weight matrix: one per ``block_entries`` entries, at most
    :data:`MAX_BLOCKS` (it depends on the matrix's size, never on the thread count)."""
    return max(1, min(MAX_BLOCKS, (m * n) // block_entries))


@njit(cache=True, nogil=True)
def _block_rows(m, blocks, t):
    """Rows ``[r0, r1)`` of block ``t`` of ``blocks`` over ``m`` rows, cut at multiples of 4."""
    per = 4 * ((m + 4 * blocks - 1) // (4 * blocks))
    return min(m, t * per), min(m, (t + 1) * per)


@njit(cache=True, nogil=True)
def _output_map_residual(J, v, zk, nk, yhat_off, out, dv):
    """The ``yhat`` edge of ``L v``: ``dv[yhat] = v[yhat] - J v[zk]``, its share of ``out``."""
    for r in range(nk):
        s = v[yhat_off + r]
        for j in range(nk):
            s -= J[r, j] * v[zk + j]
        dv[yhat_off + r] = s
        out[yhat_off + r] = s
    for r in range(nk):
        s = dv[yhat_off + r]
        for j in range(nk):
            out[zk + j] -= J[r, j] * s


@njit(cache=True, nogil=True)
def _backward_start(J, w, zk, nk, yhat_off, y):
    """Last blocks of ``y = delta^{-T} w``: ``z(k+1)`` and ``yhat``."""
    for i in range(nk):
        y[zk + i] = w[zk + i]
    if yhat_off >= 0:
        for r in range(nk):
            y[yhat_off + r] = w[yhat_off + r]
        for r in range(nk):
            s = y[yhat_off + r]
            for j in range(nk):
                y[zk + j] += J[r, j] * s


@njit(cache=True, nogil=True)
def _forward_end(J, w, zk, nk, yhat_off, x):
    """Last block of ``x = delta^{-1} w``: ``x[yhat] = w[yhat] + J x[zk]``."""
    if yhat_off >= 0:
        for r in range(nk):
            s = w[yhat_off + r]
            for j in range(nk):
                s += J[r, j] * x[zk + j]
            x[yhat_off + r] = s


@njit(cache=True, nogil=True)
def _backward_block(W, va, vz, dz, yz, p, q, do_L, do_inv, m, blocks, t):
    """Block ``t`` of the rows of one backward pass, into its own partials ``p`` and ``q``."""
    r0, r1 = _block_rows(m, blocks, t)
    if do_L:
        p[:] = 0.0
    if do_inv:
        q[:] = 0.0
    _backward_rows(W, va, vz, dz, p, yz, q, do_L, do_inv, r0, r1)


@njit(cache=True, nogil=True)
def _forward_block(W, xa, yz, xz, m, blocks, t):
    """Block ``t`` of the rows of one forward pass."""
    r0, r1 = _block_rows(m, blocks, t)
    _product_rows(W, xa, yz, xz, r0, r1)


def _backward_sweep(weights, dims, zoff, aoff, mask, J, yhat_off, v, Lv, dv, w, y, P, Q, block_entries):
    """``Lv = L v`` and ``y = delta^{-T} w`` in shared passes, last layer first.

    ``v``/``w`` of length 0 skip ``L v``/``delta^{-T} w``.  Work arrays:
    ``dv`` receives ``delta v``; ``P`` and ``Q``, shape ``(MAX_BLOCKS, max
    hidden width)``, hold the row blocks' ``W^T`` partial sums, added in
    block order.  ``block_entries``: see :func:`row_blocks` (normally
    :data:`BLOCK_ENTRIES`; tests lower it to split small matrices).
    """
    k = dims.shape[0] - 2
    do_L = v.shape[0] > 0
    do_inv = w.shape[0] > 0
    zk, nk = zoff[k + 1], dims[k + 1]
    if do_L:
        z = zoff[1]
        for i in range(dims[1]):
            dv[z + i] = v[z + i]
        for l in range(1, k + 1):
            n, z, a = dims[l], zoff[l], aoff[l]
            for i in range(n):
                dv[a + i] = v[a + i] - mask[z + i] * v[z + i]
    if do_inv:
        _backward_start(J, w, zk, nk, yhat_off, y)
    for l in range(k, 0, -1):
        n, z, a, z2, m = dims[l], zoff[l], aoff[l], zoff[l + 1], dims[l + 1]
        W = weights[l]
        va, vz, dz, yz = v[a:a + n], v[z2:z2 + m], dv[z2:z2 + m], y[z2:z2 + m]
        blocks = row_blocks(m, n, block_entries)
        if blocks > 1:
            for t in prange(blocks):
                _backward_block(W, va, vz, dz, yz, P[t, :n], Q[t, :n], do_L, do_inv, m, blocks, t)
        else:
            _backward_block(W, va, vz, dz, yz, P[0, :n], Q[0, :n], do_L, do_inv, m, 1, 0)
        for i in range(n):
            if do_L:
                s = P[0, i]
                for t in range(1, blocks):
                    s += P[t, i]
                Lv[a + i] = dv[a + i] + s
            if do_inv:
                s = Q[0, i]
                for t in range(1, blocks):
                    s += Q[t, i]
                y[a + i] = w[a + i] + s
                y[z + i] = w[z + i] + mask[z + i] * y[a + i]
    if do_L:
        for l in range(1, k + 1):
            n, z, a = dims[l], zoff[l], aoff[l]
            for i in range(n):
                Lv[z + i] = dv[z + i] - mask[z + i] * dv[a + i]
        for i in range(nk):
            Lv[zk + i] = dv[zk + i]
        if yhat_off >= 0:
            _output_map_residual(J, v, zk, nk, yhat_off, Lv, dv)


def _forward_sweep(weights, dims, zoff, aoff, mask, J, yhat_off, y, x, block_entries):
    """``x = delta^{-1} y``, first layer first (rows split as in :func:`_backward_sweep`)."""
    k = dims.shape[0] - 2
    z = zoff[1]
    for i in range(dims[1]):
        x[z + i] = y[z + i]
    for l in range(1, k + 1):
        n, z, a, z2, m = dims[l], zoff[l], aoff[l], zoff[l + 1], dims[l + 1]
        for i in range(n):
            x[a + i] = y[a + i] + mask[z + i] * x[z + i]
        W = weights[l]
        xa, yz, xz = x[a:a + n], y[z2:z2 + m], x[z2:z2 + m]
        blocks = row_blocks(m, n, block_entries)
        if blocks > 1:
            for t in prange(blocks):
                _forward_block(W, xa, yz, xz, m, blocks, t)
        else:
            _forward_block(W, xa, yz, xz, m, 1, 0)
    _forward_end(J, y, zoff[k + 1], dims[k + 1], yhat_off, x)


# Each sweep is compiled twice from one source: serially (prange runs as
# range), and with the row blocks on numba's threads.  Same split, same results.
backward_sweep = njit(cache=True, nogil=True)(renamed(_backward_sweep, "backward_sweep"))
backward_sweep_parallel = njit(cache=True, nogil=True, parallel=True)(
    renamed(_backward_sweep, "backward_sweep_parallel"))
forward_sweep = njit(cache=True, nogil=True)(renamed(_forward_sweep, "forward_sweep"))
forward_sweep_parallel = njit(cache=True, nogil=True, parallel=True)(
    renamed(_forward_sweep, "forward_sweep_parallel"))


