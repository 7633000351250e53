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
once, its contribution to ``delta^T``.  ``L^{-1} v = delta^{-1} (delta^{-T} v)``
is one block backward substitution (``W^T`` products, last layer first) and
one block forward substitution (``W`` products, first layer first): two
passes, no factorisation.  The two passes cannot be merged: the forward
product ``W_(l+1) x`` needs ``x = out[a_l]``, which is only known once the
backward product ``W_(l+1)^T y`` is complete.

The masks cannot prune ``W`` either: a dead neuron only removes the ``R_l``
coupling.  In ``delta^{-1} w``, ``out[a_l] = w[a_l] + R_l out[z_l]`` equals
``w[a_l]`` for a dead neuron, which is not zero for a general ``w`` (the
Lanczos vectors), so every column of ``W_(l+1)`` is needed; likewise every
row in the ``W^T`` products.  The only structure the masks give is that a
dead neuron of the first layer makes ``e_(z1_i)`` an exact eigenvector
(eigenvalue 1, inside the spectrum), which costs nothing to leave in.

Every kernel is serial and releases the GIL (``nogil``), so that the
smallest and largest eigenproblems can run in two threads.  Shared arguments:
``weights`` a ``numba.typed.List`` of the weight matrices (``weights[l - 1]``
is ``W_l``, C-contiguous, no copy), ``dims``, ``zoff``, ``aoff`` (from
:meth:`sheaflinalg.layout.Layout.kernel_offsets`),
``mask`` (free-vector length; the ReLU mask ``R_l`` sits at the rows of
``z_l``), ``J`` the (n_out, n_out) linearised output map and ``yhat_off``
(``-1`` when reduced).
"""

from numba import njit

# Reassociation lets LLVM vectorise the dot products (a fixed SIMD summation
# order: deterministic on a given machine); no other fast-math flag is used.
_FM = {"reassoc", "contract"}


# The row kernels below take four rows of W at a time, so that every load of
# x (or store of the accumulator) serves four rows: the passes stay close to
# the memory bandwidth of streaming W once.

@njit(cache=True, nogil=True, fastmath=_FM)
def _residual_and_transpose(W, va, vz, wz, p, sign):
    """``wz = vz - W va`` and ``p = sign * W^T wz``, in one pass over ``W``."""
    n_rows, n = W.shape
    p[:] = 0.0
    r = 0
    while r + 4 <= n_rows:
        w0, w1, w2, w3 = W[r], W[r + 1], W[r + 2], W[r + 3]
        s0 = s1 = s2 = s3 = 0.0
        for j in range(n):
            x = va[j]
            s0 += w0[j] * x
            s1 += w1[j] * x
            s2 += w2[j] * x
            s3 += w3[j] * x
        t0, t1, t2, t3 = vz[r] - s0, vz[r + 1] - s1, vz[r + 2] - s2, vz[r + 3] - s3
        wz[r], wz[r + 1], wz[r + 2], wz[r + 3] = t0, t1, t2, t3
        t0, t1, t2, t3 = sign * t0, sign * t1, sign * t2, sign * t3
        for j in range(n):
            p[j] += t0 * w0[j] + t1 * w1[j] + t2 * w2[j] + t3 * w3[j]
        r += 4
    while r < n_rows:
        w0 = W[r]
        s0 = 0.0
        for j in range(n):
            s0 += w0[j] * va[j]
        t0 = vz[r] - s0
        wz[r] = t0
        t0 = sign * t0
        for j in range(n):
            p[j] += t0 * w0[j]
        r += 1


@njit(cache=True, nogil=True, fastmath=_FM)
def _transpose_product(W, w, base, out):
    """``out = base + W^T w``."""
    n_rows, n = W.shape
    for j in range(n):
        out[j] = base[j]
    r = 0
    while r + 4 <= n_rows:
        w0, w1, w2, w3 = W[r], W[r + 1], W[r + 2], W[r + 3]
        t0, t1, t2, t3 = w[r], w[r + 1], w[r + 2], w[r + 3]
        for j in range(n):
            out[j] += t0 * w0[j] + t1 * w1[j] + t2 * w2[j] + t3 * w3[j]
        r += 4
    while r < n_rows:
        w0 = W[r]
        t0 = w[r]
        for j in range(n):
            out[j] += t0 * w0[j]
        r += 1


@njit(cache=True, nogil=True, fastmath=_FM)
def _product(W, x, base, out):
    """``out = base + W x``, last rows first.

    The backward substitution has just streamed ``W`` first row first, so its
    last rows are still in this core's L2 cache: starting there reads part of
    ``W`` from L2 instead of L3/memory.  Rows are independent, so the order
    does not change the result.
    """
    n_rows, n = W.shape
    r = n_rows
    while r % 4:
        r -= 1
        w0 = W[r]
        s0 = 0.0
        for j in range(n):
            s0 += w0[j] * x[j]
        out[r] = base[r] + s0
    while r >= 4:
        r -= 4
        w0, w1, w2, w3 = W[r], W[r + 1], W[r + 2], W[r + 3]
        s0 = s1 = s2 = s3 = 0.0
        for j in range(n):
            xj = x[j]
            s0 += w0[j] * xj
            s1 += w1[j] * xj
            s2 += w2[j] * xj
            s3 += w3[j] * xj
        out[r], out[r + 1], out[r + 2], out[r + 3] = base[r] + s0, base[r + 1] + s1, base[r + 2] + s2, base[r + 3] + s3


@njit(cache=True, nogil=True)
def laplacian_matvec(weights, dims, zoff, aoff, mask, J, yhat_off, v, out, work):
    """``out = delta^T (delta v)``; ``work`` (same length as ``v``) receives ``delta v``."""
    k = dims.shape[0] - 2
    z = zoff[1]
    for i in range(dims[1]):
        work[z + i] = v[z + i]
    for l in range(1, k + 1):
        n, z, a, z2 = dims[l], zoff[l], aoff[l], zoff[l + 1]
        for i in range(n):
            work[a + i] = v[a + i] - mask[z + i] * v[z + i]
            out[z + i] = work[z + i] - mask[z + i] * work[a + i]
        W = weights[l]
        oa = out[a:a + n]
        _residual_and_transpose(W, v[a:a + n], v[z2:z2 + dims[l + 1]], work[z2:z2 + dims[l + 1]],
                                oa, -1.0)
        for i in range(n):
            oa[i] += work[a + i]
    zk, nk = zoff[k + 1], dims[k + 1]
    for i in range(nk):
        out[zk + i] = work[zk + i]
    if yhat_off >= 0:
        for r in range(nk):
            s = v[yhat_off + r]
            for j in range(nk):
                s -= J[r, j] * v[zk + j]
            work[yhat_off + r] = s
            out[yhat_off + r] = s
        for r in range(nk):
            s = work[yhat_off + r]
            for j in range(nk):
                out[zk + j] -= J[r, j] * s


@njit(cache=True, nogil=True)
def backward_substitution(weights, dims, zoff, aoff, mask, J, yhat_off, v, out):
    """``out = delta^{-T} v`` (solve ``delta^T out = v``, last block first)."""
    k = dims.shape[0] - 2
    zk, nk = zoff[k + 1], dims[k + 1]
    for i in range(nk):
        out[zk + i] = v[zk + i]
    if yhat_off >= 0:
        for r in range(nk):
            out[yhat_off + r] = v[yhat_off + r]
        for r in range(nk):
            s = out[yhat_off + r]
            for j in range(nk):
                out[zk + j] += J[r, j] * s
    for l in range(k, 0, -1):
        n, z, a, z2 = dims[l], zoff[l], aoff[l], zoff[l + 1]
        W = weights[l]
        _transpose_product(W, out[z2:z2 + dims[l + 1]], v[a:a + n], out[a:a + n])
        for i in range(n):
            out[z + i] = v[z + i] + mask[z + i] * out[a + i]


@njit(cache=True, nogil=True)
def forward_substitution(weights, dims, zoff, aoff, mask, J, yhat_off, w, out):
    """``out = delta^{-1} w`` (solve ``delta out = w``, first block first)."""
    k = dims.shape[0] - 2
    z = zoff[1]
    for i in range(dims[1]):
        out[z + i] = w[z + i]
    for l in range(1, k + 1):
        n, z, a, z2 = dims[l], zoff[l], aoff[l], zoff[l + 1]
        for i in range(n):
            out[a + i] = w[a + i] + mask[z + i] * out[z + i]
        W = weights[l]
        m = dims[l + 1]
        _product(W, out[a:a + n], w[z2:z2 + m], out[z2:z2 + m])
    if yhat_off >= 0:
        zk, nk = zoff[k + 1], dims[k + 1]
        for r in range(nk):
            s = w[yhat_off + r]
            for j in range(nk):
                s += J[r, j] * out[zk + j]
            out[yhat_off + r] = s


@njit(cache=True, nogil=True)
def laplacian_solve(weights, dims, zoff, aoff, mask, J, yhat_off, v, out, work):
    """``out = L^{-1} v = delta^{-1} (delta^{-T} v)``; ``work`` receives ``delta^{-T} v``."""
    backward_substitution(weights, dims, zoff, aoff, mask, J, yhat_off, v, work)
    forward_substitution(weights, dims, zoff, aoff, mask, J, yhat_off, work, out)
