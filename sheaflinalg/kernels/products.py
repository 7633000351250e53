"""Batch products of the kernels: ``E A^T`` outer products and row sums over the samples (numba).

Samples are columns (see :mod:`sheaflinalg.kernels.force`).  These are the
weight-edge sums of the joint dynamics (``W_l`` moves by ``E[z_l] a_(l-1)^T``)
and of the gradient-descent baseline.
"""

import numpy as np
from numba import njit

# Above this many multiply-adds a layer product goes to BLAS; below it the
# hand-written loops (no call overhead) are faster.
BLAS_THRESHOLD = 1 << 16


# fastmath lets LLVM vectorise the batch reduction (it reorders the sum only).
@njit(cache=True, fastmath=True)
def outer_product(E, A, out):
    """``out = E A^T`` (``E`` (n, M), ``A`` (m, M), ``out`` (n, m) C-contiguous).

    Large products go to BLAS, writing straight into ``out`` (no allocation).
    """
    n, M = E.shape
    m = A.shape[0]
    if n * m * M >= BLAS_THRESHOLD:
        np.dot(E, A.T, out)
    else:
        for i in range(n):
            for j in range(m):
                acc = 0.0
                for s in range(M):
                    acc += E[i, s] * A[j, s]
                out[i, j] = acc


@njit(cache=True, fastmath=True)
def row_sums(E, out):
    """``out[i] = sum_s E[i, s]`` (vectorised reduction)."""
    n, M = E.shape
    for i in range(n):
        acc = 0.0
        for s in range(M):
            acc += E[i, s]
        out[i] = acc


@njit(cache=True, fastmath={"reassoc"})
def outer_sums_range(E, eo, n, A, ao, m, w_out, b_out, s0, s1, accumulate):
    """``W = E[eo:eo+n] A[ao:ao+m]^T`` and ``b = row sums of E[eo:eo+n]`` over the samples ``s0 <= s < s1``.

    ``W`` (row-major) goes to ``w_out``, ``b`` to ``b_out``; added to them
    when ``accumulate``.  Each pass over the samples reads one row of ``E``
    and up to four rows of ``A`` (the bias sum rides on the last pass), so
    the rows are read a quarter as often as with one dot product per pass.
    Sums are vectorised ("reassoc" reorders them, nothing else).
    """
    u0 = np.uint64(s0)
    u1 = np.uint64(s1)
    for i in range(n):
        r = eo + i
        wo = i * m
        j = 0
        while j + 4 <= m:
            c0 = 0.0
            c1 = 0.0
            c2 = 0.0
            c3 = 0.0
            for s in range(u0, u1):
                e = E[r, s]
                c0 += e * A[ao + j, s]
                c1 += e * A[ao + j + 1, s]
                c2 += e * A[ao + j + 2, s]
                c3 += e * A[ao + j + 3, s]
            if accumulate:
                w_out[wo + j] += c0
                w_out[wo + j + 1] += c1
                w_out[wo + j + 2] += c2
                w_out[wo + j + 3] += c3
            else:
                w_out[wo + j] = c0
                w_out[wo + j + 1] = c1
                w_out[wo + j + 2] = c2
                w_out[wo + j + 3] = c3
            j += 4
        rem = m - j
        c0 = 0.0
        c1 = 0.0
        c2 = 0.0
        cb = 0.0
        if rem == 3:
            for s in range(u0, u1):
                e = E[r, s]
                c0 += e * A[ao + j, s]
                c1 += e * A[ao + j + 1, s]
                c2 += e * A[ao + j + 2, s]
                cb += e
        elif rem == 2:
            for s in range(u0, u1):
                e = E[r, s]
                c0 += e * A[ao + j, s]
                c1 += e * A[ao + j + 1, s]
                cb += e
        elif rem == 1:
            for s in range(u0, u1):
                e = E[r, s]
                c0 += e * A[ao + j, s]
                cb += e
        else:
            for s in range(u0, u1):
                cb += E[r, s]
        if not accumulate:
            for q in range(rem):
                w_out[wo + j + q] = 0.0
            b_out[i] = 0.0
        if rem >= 1:
            w_out[wo + j] += c0
        if rem >= 2:
            w_out[wo + j + 1] += c1
        if rem >= 3:
            w_out[wo + j + 2] += c2
        b_out[i] += cb
