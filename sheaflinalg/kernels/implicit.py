"""Per-sample block Cholesky of the implicit state operator ``I + c L_P`` of a chain (IMEX training).

For a chain ``[n_0, ..., n_(k+1)]`` the moving stalks of one sample are the
blocks ``z1, a1, z2, ..., ak, z(k+1)`` (the layout's free order without
``yhat``).  With the weights and the ReLU pattern ``R_l = (z_l >= 0)`` frozen,
the interior edges ``e_z1 = z1 - ...``, ``e_al = a_l - R_l z_l``,
``e_z(l+1) = z_(l+1) - W_(l+1) a_l - ...`` make the square unit lower
triangular coboundary ``D`` on those blocks, and the quadratic part of the
discord energy has the Hessian ``L_P = D^T D`` (plus ``out_curv I`` on
``z(k+1)`` when the output edge is quadratic).  The matrix
``A = I + c L_P`` is block tridiagonal along the chain:

* ``A[z_l, z_l] = (1 + c + c R_l) I`` (``(1 + c + c out_curv) I`` for ``z(k+1)``),
* ``A[a_l, a_l] = (1 + c) I + c W_(l+1)^T W_(l+1)`` (the same for every sample),
* ``A[a_l, z_l] = -c R_l`` and ``A[z_(l+1), a_l] = -c W_(l+1)``.

:func:`factor_chain` writes ``A = L L^T`` with ``L`` block lower bidiagonal
(diagonal blocks ``L_b``, subdiagonal blocks ``G_b = A[b, b-1] L_(b-1)^-T``)
for every sample; :func:`solve_chain` solves with it.  Samples are rows of the
per-sample arrays here (``(M, n_move)``), so each sample's data is contiguous.
"""

import numpy as np
from numba import njit


@njit(cache=True)
def chain_blocks(dims):
    """``(size, loff, goff)``: the blocks' sizes and the offsets of ``L_b`` and ``G_b`` in a sample's factor.

    Examples
    --------
    >>> size, loff, goff = chain_blocks(np.array([2, 3, 1]))
    >>> size.tolist(), loff.tolist(), goff.tolist()
    ([3, 3, 1], [0, 9, 18, 19], [0, 0, 9, 12])
    """
    nb = 2 * (dims.shape[0] - 1) - 1
    size = np.empty(nb, dtype=np.int64)
    loff = np.zeros(nb + 1, dtype=np.int64)
    goff = np.zeros(nb + 1, dtype=np.int64)
    for b in range(nb):
        size[b] = dims[b // 2 + 1]
        loff[b + 1] = loff[b] + size[b] * size[b]
        goff[b + 1] = goff[b] + (size[b] * size[b - 1] if b > 0 else 0)
    return size, loff, goff


@njit(cache=True)
def _cholesky_lower(A):
    """``A = L L^T`` in place in the lower triangle of the SPD ``A`` (the upper triangle is not read)."""
    n = A.shape[0]
    for j in range(n):
        d = A[j, j]
        for q in range(j):
            d -= A[j, q] * A[j, q]
        d = np.sqrt(d)
        A[j, j] = d
        for i in range(j + 1, n):
            v = A[i, j]
            for q in range(j):
                v -= A[i, q] * A[j, q]
            A[i, j] = v / d


@njit(cache=True)
def _forward_rows(L, B):
    """Every row ``r`` of ``B`` becomes ``L^-1 B[r]`` (``B = B L^-T``); ``L`` lower triangular."""
    n = L.shape[0]
    for r in range(B.shape[0]):
        for i in range(n):
            v = B[r, i]
            for q in range(i):
                v -= L[i, q] * B[r, q]
            B[r, i] = v / L[i, i]


@njit(cache=True)
def _subtract_gram_lower(A, G):
    """``A -= G G^T`` on the lower triangle of ``A``."""
    n, m = G.shape
    for i in range(n):
        for j in range(i + 1):
            v = 0.0
            for q in range(m):
                v += G[i, q] * G[j, q]
            A[i, j] -= v


@njit(cache=True)
def _pinned(St, s, r, l, n_hidden):
    """Whether the stalk ``r`` of sample ``s`` is a hidden pre-activation on its switching surface (``z = 0``)."""
    return l <= n_hidden and St[s, r] == 0.0


@njit(cache=True)
def _first_blocks(St, s, theta, lay, c, out_curv, shared, b, r0, Lb, Gb):
    """The diagonal block ``A[b, b]`` into ``Lb`` and the coupling ``A[b, b-1]`` into ``Gb`` (block ``b > 0``).

    A hidden ``z_j = 0`` (on its switching surface) gets the row and column of the identity: the
    integrator moves it explicitly (by its Filippov force, zero while it slides).
    """
    n = Lb.shape[0]
    n_hidden = lay.dims.shape[0] - 2
    l = b // 2 + 1
    if b % 2 == 1:
        Lb[:, :] = shared
    else:
        Lb[:, :] = 0.0
        for i in range(n):
            curv = out_curv if l > n_hidden else (1.0 if St[s, r0 + i] >= 0 else 0.0)
            Lb[i, i] = 1.0 if _pinned(St, s, r0 + i, l, n_hidden) else 1.0 + c + c * curv
    if b == 0:
        return
    if b % 2 == 1:
        # a_l after z_l (whose rows sit just before): -c R_l.
        Gb[:, :] = 0.0
        for i in range(n):
            on = St[s, r0 - n + i] >= 0 and not _pinned(St, s, r0 - n + i, l, n_hidden)
            Gb[i, i] = -c if on else 0.0
    else:
        m = Gb.shape[1]
        wo = lay.woff[l]
        for i in range(n):
            keep = 0.0 if _pinned(St, s, r0 + i, l, n_hidden) else 1.0
            for j in range(m):
                Gb[i, j] = -c * keep * theta[wo + i * m + j]


@njit(cache=True)
def factor_chain(St, theta, lay, c, out_curv, shared, Lf, Gf):
    """Block Cholesky factors of ``I + c L_P`` of every sample (see the module docstring).

    Parameters
    ----------
    St : ndarray, shape (M, n_move)
        The moving stalks of each sample (rows: samples); the pattern ``z_l >= 0`` is read off them.
    theta : ndarray
        Flat parameters.
    lay : KernelLayout
    c : float
        The factor ``c`` (``gamma h alpha`` in the integrator).
    out_curv : float
        Curvature of the output edge taken implicitly (1: quadratic output edge, 0: none).
    shared : ndarray
        Flat like one sample's ``L`` (:func:`chain_blocks`), holding ``A[a_l, a_l]`` in the blocks of the ``a_l``.
    Lf, Gf : ndarray, shape (M, loff[-1]), (M, goff[-1])
        Receive every sample's blocks ``L_b`` and ``G_b`` (row-major).
    """
    size, loff, goff = chain_blocks(lay.dims)
    for s in range(St.shape[0]):
        r0 = 0
        for b in range(size.shape[0]):
            n = size[b]
            Lb = Lf[s, loff[b]:loff[b + 1]].reshape(n, n)
            m = size[b - 1] if b > 0 else 0
            Gb = Gf[s, goff[b]:goff[b + 1]].reshape(n, m)
            _first_blocks(St, s, theta, lay, c, out_curv, shared[loff[b]:loff[b + 1]].reshape(n, n), b, r0, Lb,
                          Gb)
            if b > 0:
                _forward_rows(Lf[s, loff[b - 1]:loff[b]].reshape(m, m), Gb)
                _subtract_gram_lower(Lb, Gb)
            _cholesky_lower(Lb)
            r0 += n


@njit(cache=True)
def _lower_solve(L, o, n, X, r0, transpose):
    """``X[r0:r0 + n] = L^-1 X[r0:r0 + n]`` (or ``L^-T``) in place for every sample (column), ``L`` the
    ``n x n`` row-major blocks at row ``o`` of the sample-minor factors."""
    M = X.shape[1]
    if not transpose:
        for i in range(n):
            row = o + i * n
            for q in range(i):
                for s in range(M):
                    X[r0 + i, s] -= L[row + q, s] * X[r0 + q, s]
            for s in range(M):
                X[r0 + i, s] /= L[row + i, s]
    else:
        for i in range(n - 1, -1, -1):
            for q in range(i + 1, n):
                for s in range(M):
                    X[r0 + i, s] -= L[o + q * n + i, s] * X[r0 + q, s]
            for s in range(M):
                X[r0 + i, s] /= L[o + i * n + i, s]


@njit(cache=True)
def solve_chain(L, G, dims, X):
    """Solve ``(I + c L_P) x = r`` of every sample in place with the factors of :func:`factor_chain`.

    Parameters
    ----------
    L, G : ndarray, shape (loff[-1], M), (goff[-1], M)
        The factors, samples as columns (the transposes of :func:`factor_chain`'s).
    dims : ndarray
        ``lay.dims``.
    X : ndarray, shape (n_move, M)
        Right-hand sides (samples as columns); receives the solutions.
    """
    size, loff, goff = chain_blocks(dims)
    nb = size.shape[0]
    M = X.shape[1]
    rows = np.zeros(nb + 1, dtype=np.int64)
    for b in range(nb):
        rows[b + 1] = rows[b] + size[b]
    for b in range(nb):                # L y = r: y_b = L_b^-1 (r_b - G_b y_(b-1))
        n, r0 = size[b], rows[b]
        if b > 0:
            m, p0 = size[b - 1], rows[b - 1]
            for i in range(n):
                g = goff[b] + i * m
                for q in range(m):
                    for s in range(M):
                        X[r0 + i, s] -= G[g + q, s] * X[p0 + q, s]
        _lower_solve(L, loff[b], n, X, r0, False)
    for b in range(nb - 1, -1, -1):    # L^T x = y: x_b = L_b^-T (y_b - G_(b+1)^T x_(b+1))
        n, r0 = size[b], rows[b]
        if b < nb - 1:
            n1, p1 = size[b + 1], rows[b + 1]
            for q in range(n1):
                g = goff[b + 1] + q * n
                for i in range(n):
                    for s in range(M):
                        X[r0 + i, s] -= G[g + i, s] * X[p1 + q, s]
        _lower_solve(L, loff[b], n, X, r0, True)
