"""Compiled Newton solves of the nudged loss edge in output coordinates, one small problem per sample.

Per sample (rows of the arrays), with ``n`` outputs: minimise ::

    psi(w) = 1/2 w^T P w + h^T w + b * loss(f + w, y)

over ``w`` in ``R^n`` by Newton's method with a backtracking (Armijo) line
search.  ``P`` is symmetric positive definite; the Newton matrix ``P + b H``
is factorised by Cholesky (a failure, possible only for ``b < 0``, is
reported in ``status``).  ``phi`` codes as :data:`~sheaflinalg.kernels.potentials.PHI_CODES`
(identity, sigmoid, tanh, softmax); ``loss`` 0 is the squared error
``1/2 ||phi(z) - y||^2``, 1 the cross-entropy written in ``z``
(``sum(softplus(z) - y z)`` for sigmoid, ``sum(y) logsumexp(z) - y . z`` for
softmax).  ``H`` is the exact Hessian, except for the squared error through a
nonlinear ``phi``: the nonnegative part of the diagonal Hessian (sigmoid,
tanh) or the Gauss-Newton matrix ``J^T J`` (softmax), which keeps ``P + b H``
definite for ``b > 0``.
"""

import numpy as np
from numba import njit

#: A gradient at most this many units of rounding of its terms counts as zero (:func:`_stationary`).
ROUNDING = 64 * np.finfo(np.float64).eps

# The problems are tiny (n is the number of outputs): plain loops, no BLAS calls (whose per-call cost,
# thread hand-offs included, is many times the arithmetic) and no allocation inside the sample loop.


@njit(cache=True)
def _dot(a, b, n):
    """``a[:n] . b[:n]``."""
    total = 0.0
    for i in range(n):
        total += a[i] * b[i]
    return total


@njit(cache=True)
def _phi(code, z, p):
    """``p = phi(z)`` for one sample."""
    n = z.shape[0]
    if code == 0:
        p[:] = z
    elif code == 1:
        for i in range(n):
            p[i] = 1.0 / (1.0 + np.exp(-z[i])) if z[i] >= 0 else np.exp(z[i]) / (1.0 + np.exp(z[i]))
    elif code == 2:
        for i in range(n):
            p[i] = np.tanh(z[i])
    else:
        top = z.max()
        total = 0.0
        for i in range(n):
            p[i] = np.exp(z[i] - top)
            total += p[i]
        p /= total


@njit(cache=True)
def potential(code, loss, z, y, p):
    """``loss(z, y)`` of one sample (``p`` is scratch of the same size)."""
    n = z.shape[0]
    value = 0.0
    if loss == 1 and code == 1:
        for i in range(n):
            value += np.log1p(np.exp(-abs(z[i]))) + max(z[i], 0.0) - y[i] * z[i]
        return value
    if loss == 1:
        # lse - z_i = (top - z_i) + log1p(sum over j != argmax of exp(z_j - top)): no cancellation
        # when the prediction is near certain (lse and z_top then agree to many digits, and their
        # difference, the loss, would keep only the digits rounding left of it).
        top_at = np.argmax(z)
        top = z[top_at]
        rest = 0.0
        for i in range(n):
            if i != top_at:
                rest += np.exp(z[i] - top)
        shift = np.log1p(rest)
        for i in range(n):
            value += y[i] * ((top - z[i]) + shift)
        return value
    _phi(code, z, p)
    for i in range(n):
        value += 0.5 * (p[i] - y[i]) ** 2
    return value


@njit(cache=True)
def potentials(code, loss, Z, Y, out):
    """``out[s] = loss(Z[s], Y[s])`` for every sample."""
    p = np.empty(Z.shape[1])
    for s in range(Z.shape[0]):
        out[s] = potential(code, loss, Z[s], Y[s], p)


@njit(cache=True)
def gradients(code, loss, Z, Y, out):
    """``out[s]`` = the potential's gradient in ``z`` at ``Z[s]`` for every sample."""
    n = Z.shape[1]
    H, p = np.empty((n, n)), np.empty(n)
    for s in range(Z.shape[0]):
        newton_matrix(code, loss, Z[s], Y[s], out[s], H, p, False)


@njit(cache=True)
def newton_matrix(code, loss, z, y, g, H, p, convex):
    """The potential's gradient ``g`` and Hessian ``H`` of one sample at ``z`` (``p`` is scratch).

    With ``convex``, the squared error through a nonlinear ``phi`` gets a positive semidefinite ``H``
    instead: the Gauss-Newton matrix ``J^T J`` (softmax), the diagonal Hessian's nonnegative part
    (sigmoid, tanh).  The cross-entropies and the identity have one ``H`` (positive semidefinite).
    """
    n = z.shape[0]
    _phi(code, z, p)
    H[:, :] = 0.0
    if code == 3:
        _softmax_terms(loss, p, y, g, H, convex)
        return
    for i in range(n):
        d = p[i] - y[i]
        if code == 0:
            g[i] = d
            H[i, i] = 1.0
            continue
        slope = p[i] * (1.0 - p[i]) if code == 1 else 1.0 - p[i] * p[i]
        if loss == 1:
            g[i] = d
            H[i, i] = slope
        else:
            curvature = slope * (1.0 - 2.0 * p[i]) if code == 1 else -2.0 * p[i] * slope
            g[i] = slope * d
            H[i, i] = slope * slope + d * curvature
            if convex:
                H[i, i] = max(H[i, i], 0.0)


@njit(cache=True)
def _softmax_terms(loss, p, y, g, H, convex):
    """:func:`newton_matrix` of a softmax output (``p`` its probabilities)."""
    n = p.shape[0]
    # Jacobian J = diag(p) - p p^T (symmetric): the cross-entropy's Hessian is sum(y) J.
    if loss == 1:
        weight = y.sum()
        for i in range(n):
            g[i] = weight * p[i] - y[i]
            for j in range(n):
                H[i, j] = weight * ((p[i] if i == j else 0.0) - p[i] * p[j])
        return
    pd = 0.0            # C = sum_i p_i d_i, d = p - y
    pp = 0.0            # p . p
    for i in range(n):
        pd += p[i] * (p[i] - y[i])
        pp += p[i] * p[i]
    for i in range(n):
        ci = p[i] * (p[i] - y[i])
        g[i] = ci - p[i] * pd
        for j in range(n):
            cj = p[j] * (p[j] - y[j])
            # J^2: sum_k p_i (d_ik - p_k) p_k (d_kj - p_j)
            H[i, j] = p[i] * ((p[i] if i == j else 0.0) - p[i] * p[j] - p[j] * p[j] + pp * p[j])
            if not convex:      # + sum_i d_i Hess(p_i) = diag(c - C p) - c p^T - p c^T + 2 C p p^T
                H[i, j] += ((ci - pd * p[i]) if i == j else 0.0) - ci * p[j] - p[i] * cj + 2.0 * pd * p[i] * p[j]


@njit(cache=True)
def _cholesky_solve(K, r, out):
    """``out = -K^-1 r`` by Cholesky (``K`` overwritten by its factor); False if ``K`` is not positive definite."""
    n = K.shape[0]
    for j in range(n):
        d = K[j, j] - _dot(K[j], K[j], j)
        if not d > 0.0:
            return False
        K[j, j] = np.sqrt(d)
        for i in range(j + 1, n):
            K[i, j] = (K[i, j] - _dot(K[i], K[j], j)) / K[j, j]
    _factored_solve(K, r, out)
    return True


@njit(cache=True)
def _quadratic(P, h, w, out):
    """``out = P w + h``; returns ``1/2 w^T P w + h^T w``."""
    n = w.shape[0]
    value = 0.0
    for i in range(n):
        v = 0.0
        for j in range(n):
            v += P[i, j] * w[j]
        out[i] = v + h[i]
        value += w[i] * (0.5 * v + h[i])
    return value


@njit(cache=True)
def _psi(P, h, f, y, w, b, code, loss, work):
    """``psi(w)`` of one sample (``work``: three scratch vectors)."""
    z, p, q = work[0], work[1], work[2]
    for i in range(w.shape[0]):
        z[i] = f[i] + w[i]
    return _quadratic(P, h, w, q) + b * potential(code, loss, z, y, p)


@njit(cache=True)
def _newton_direction(P, b, code, loss, z, y, g, H, p, K, r, step, convex):
    """The Newton step of one sample at ``z``: ``r`` (``P w + h`` on entry) gets ``+ b g``, ``step`` is
    ``-(P + b H)^-1 r``; False if ``P + b H`` is not positive definite (``r`` is then left as on entry)."""
    n = z.shape[0]
    newton_matrix(code, loss, z, y, g, H, p, convex)
    for i in range(n):
        for j in range(n):
            K[i, j] = P[i, j] + b * H[i, j]
    for i in range(n):
        step[i] = r[i] + b * g[i]
    if not _cholesky_solve(K, step, step):
        return False
    for i in range(n):
        r[i] += b * g[i]
    return True


@njit(cache=True)
def _stationary(r, size):
    """Whether the gradient ``r = P w + h + b g`` is at the rounding level of its terms (``size``: the
    largest of ``|P w + h|`` and ``|h|``, plus ``|b| (|g| + 1)``, the ``1`` for the absolute rounding of
    the output's probabilities).  A near-certain softmax prediction makes ``g`` tiny and ``P`` may be
    small: no Newton step can then shrink the step below ``tol |w|``, but the gradient is as small as
    rounding allows."""
    return np.abs(r).max() <= ROUNDING * size


@njit(cache=True)
def _newton(P, h, f, y, b, code, loss, tol, cap, w, vec, mats):
    """Newton's method on one sample's ``psi`` from ``w = 0``; ``w`` receives the minimiser.

    ``vec`` (7, n) and ``mats`` (2, n, n) are scratch.  Returns the steps taken (``cap`` when not
    converged), or ``-1`` when ``P + b H`` is not positive definite (``w`` is then the last iterate).
    """
    n = f.shape[0]
    g, r, step, trial_w, work = vec[0], vec[1], vec[2], vec[3], vec[4:7]
    H, K = mats[0], mats[1]
    w[:] = 0.0
    base = _psi(P, h, f, y, w, b, code, loss, work)
    for it in range(1, cap + 1):
        for i in range(n):
            work[0, i] = f[i] + w[i]
        _quadratic(P, h, w, r)
        size = np.abs(r).max() + np.abs(h).max()
        exact = _newton_direction(P, b, code, loss, work[0], y, g, H, work[1], K, r, step, False)
        if not exact and not (b > 0 and _newton_direction(P, b, code, loss, work[0], y, g, H, work[1], K, r,
                                                          step, True)):
            return -1
        if it > 1 and _stationary(r, size + abs(b) * (np.abs(g).max() + 1.0)):
            return it - 1
        slope = _dot(r, step, n)
        # Near the minimum (a step of 1e-6 of w, in Newton's quadratic range) psi cannot decrease
        # measurably in rounding: the full step is taken there without a line search.
        # A step below the rounding of the output's value (a near-certain prediction, whose pull is
        # tiny) cannot change psi at all: it is taken whole and ends the iteration.
        # A Newton decrement |slope| below 1e-12 |psi| puts Armijo's margin (1e-4 |slope|) under psi's
        # rounding: the line search cannot judge the step, and an exact Newton step that small is in the
        # quadratic range, so it is taken whole (a confident sample at nudging 1 stalled there otherwise).
        floor = ROUNDING * np.abs(work[0]).max()
        near = exact and (np.abs(step).max() <= 1e-6 * np.abs(w).max() or np.abs(step).max() <= floor
                          or abs(slope) <= 1e-12 * abs(base))
        t = 2.0
        trial = np.inf
        while t > 1e-12 and (t == 2.0 or (not near and trial > base + 1e-4 * t * slope
                                          and abs(slope) > 1e-15 * (abs(base) + 1e-300))):
            t *= 0.5
            for i in range(n):
                trial_w[i] = w[i] + t * step[i]
            trial = _psi(P, h, f, y, trial_w, b, code, loss, work)
        w[:] = trial_w
        base = trial
        quadratic = code == 0 and loss == 0         # the first step is exact
        if quadratic or (exact and t == 1.0 and np.abs(step).max() <= max(tol * np.abs(w).max(), floor)):
            return it
    return cap


@njit(cache=True)
def _invert(G, out):
    """``out = G^-1`` of a symmetric positive definite ``G`` (Cholesky; ``G`` is overwritten by its factor).

    Gram matrices of the rows are ``>= I``: positive definite in exact arithmetic.  Returns False when the
    factorisation fails in float64 (entries so large that the identity is lost to rounding, or not
    finite: weights grown past float64's range).
    """
    r = G.shape[0]
    unit = np.zeros(r)
    for k in range(r):
        unit[:] = 0.0
        unit[k] = -1.0              # _cholesky_solve returns -G^-1 times its right-hand side
        if k == 0:
            if not _cholesky_solve(G, unit, out[k]):
                return False
        else:
            _factored_solve(G, unit, out[k])
    return True


@njit(cache=True)
def _factored_solve(L, r, out):
    """``out = -(L L^T)^-1 r`` with the Cholesky factor ``L`` (lower triangle) already computed."""
    n = L.shape[0]
    for i in range(n):
        out[i] = (-r[i] - _dot(L[i], out, i)) / L[i, i]
    for i in range(n - 1, -1, -1):
        v = out[i]
        for k in range(i + 1, n):
            v -= L[k, i] * out[k]
        out[i] = v / L[i, i]


@njit(cache=True)
def output_coefficients(G, C, F, Y, b, code, loss, tol, cap, V, W, status):
    """Every sample's coefficients ``[u; lambda] = G^-1 [w; c]``, ``w`` minimising ``psi``.

    Parameters
    ----------
    G : ndarray, shape (S, r, r)
        The rows' Gram matrices (``r = n + s``: ``n`` outputs, then ``s`` held coordinates); overwritten.
    C : ndarray, shape (S, s)
        The values the held rows move by.
    F, Y : ndarray, shape (S, n)
        Output pre-activation at zero residuals, and the targets.
    b : float
        Nudging (nonzero).
    code, loss : int
        Output activation and loss codes (module notes).
    tol : float
        A full Newton step of at most ``tol * max|w|`` ends a sample's iteration.
    cap : int
        Largest number of Newton steps.
    V : ndarray, shape (S, r)
        Output: the coefficients.
    W : ndarray, shape (S, n)
        Output: the output displacements.
    status : ndarray of int64, shape (S,)
        Output: Newton steps taken (``cap`` when not converged), ``-1`` when ``P + b H`` is not
        positive definite (possible for ``b < 0`` only), ``-2`` when ``G`` is not positive definite in
        float64 (the sample's ``V`` and ``W`` are then left unset).

    Notes
    -----
    ``psi(w) = 1/2 [w; c]^T G^-1 [w; c] + b loss(f + w)`` up to a constant: ``P`` and ``h`` of the
    module notes are ``(G^-1)_oo`` and ``(G^-1)_os c``.
    """
    S, n = F.shape
    r = G.shape[1]
    Ginv, P = np.empty((r, r)), np.empty((n, n))
    h, full = np.empty(n), np.empty(r)
    vec, mats = np.empty((7, n)), np.empty((2, n, n))
    for s in range(S):
        if not _invert(G[s], Ginv):
            status[s] = -2
            continue
        for i in range(n):
            P[i, :] = Ginv[i, :n]
            h[i] = _dot(Ginv[i, n:], C[s], r - n)
        status[s] = _newton(P, h, F[s], Y[s], b, code, loss, tol, cap, W[s], vec, mats)
        full[:n] = W[s]
        full[n:] = C[s]
        for i in range(r):
            V[s, i] = _dot(Ginv[i], full, r)


@njit(cache=True, nogil=True)
def row_maxima(a, b, size, move):
    """Per row ``s``: ``size[s]`` raised to ``max_j |a[s, j]|`` and ``move[s]`` to ``max_j |a[s, j] - b[s, j]|``
    (in place, one pass, no temporaries): the smooth equilibrium's step sizes, node by node.  A NaN makes the
    maximum infinite (a diverging iteration must not look settled)."""
    for s in range(a.shape[0]):
        largest, step = size[s], move[s]
        for j in range(a.shape[1]):
            d, m = abs(a[s, j]), abs(a[s, j] - b[s, j])
            if not d <= largest:
                largest = d if d == d else np.inf
            if not m <= step:
                step = m if m == m else np.inf
        size[s], move[s] = largest, step
