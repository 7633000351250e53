"""Compiled Newton solves of the nudged loss edge in output coordinates, one small problem per sample.

Per sample (rows of the arrays), with ``n`` outputs: minimise ::

    psi(w) = 1/2 w^T P w + h^T w + b * loss(f + w, y)

over ``w`` in ``R^n`` by Newton's method with a backtracking (Armijo) line
search.  ``P`` is symmetric positive definite; the Newton matrix ``P + b H``
is factorised by Cholesky (a failure, possible only for ``b < 0``, is
reported in ``status``).  ``phi`` codes as :data:`~sheaflinalg.kernels.force.PHI_CODES`
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
        top = z.max()
        lse = 0.0
        for i in range(n):
            lse += np.exp(z[i] - top)
        lse = np.log(lse) + top
        for i in range(n):
            value += y[i] * (lse - z[i])
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
    for i in range(n):
        out[i] = (-r[i] - _dot(K[i], out, i)) / K[i, i]
    for i in range(n - 1, -1, -1):
        v = out[i]
        for k in range(i + 1, n):
            v -= K[k, i] * out[k]
        out[i] = v / K[i, i]
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
def newton_displacements(P, h, F, Y, b, code, loss, tol, cap, W, status):
    """Newton's method on every sample's ``psi``; ``W`` receives the minimisers.

    Parameters
    ----------
    P : ndarray, shape (S, n, n)
    h, F, Y : ndarray, shape (S, n)
    b : float
        Nudging (nonzero).
    code, loss : int
        Output activation and loss codes (module notes).
    tol : float
        A full Newton step of at most ``tol * max|w|`` ends a sample's iteration.
    cap : int
        Largest number of Newton steps.
    W : ndarray, shape (S, n)
        Output: the displacements (zeros on entry are not needed).
    status : ndarray of int64, shape (S,)
        Output: Newton steps taken (``cap`` when not converged), or ``-1`` when ``P + b H`` is not
        positive definite (the sample's ``W`` is then its last iterate).
    """
    S, n = F.shape
    g, r, step, trial_w = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    work = np.empty((3, n))
    H, K = np.empty((n, n)), np.empty((n, n))
    for s in range(S):
        w, Ps = W[s], P[s]
        w[:] = 0.0
        status[s] = cap
        base = _psi(Ps, h[s], F[s], Y[s], w, b, code, loss, work)
        for it in range(1, cap + 1):
            for i in range(n):
                work[0, i] = F[s, i] + w[i]
            _quadratic(Ps, h[s], w, r)
            exact = _newton_direction(Ps, b, code, loss, work[0], Y[s], g, H, work[1], K, r, step, False)
            if not exact and not (b > 0 and _newton_direction(Ps, b, code, loss, work[0], Y[s], g, H, work[1], K, r,
                                                              step, True)):
                status[s] = -1
                break
            slope = _dot(r, step, n)
            t = 2.0
            trial = np.inf
            # Within rounding of the minimum psi cannot decrease measurably: the full step is taken there.
            while t > 1e-12 and (t == 2.0 or (trial > base + 1e-4 * t * slope
                                              and abs(slope) > 1e-15 * (abs(base) + 1e-300))):
                t *= 0.5
                for i in range(n):
                    trial_w[i] = w[i] + t * step[i]
                trial = _psi(Ps, h[s], F[s], Y[s], trial_w, b, code, loss, work)
            w[:] = trial_w
            base = trial
            quadratic = code == 0 and loss == 0         # the first step is exact
            if quadratic or (exact and t == 1.0 and np.abs(step).max() <= tol * np.abs(w).max()):
                status[s] = it
                break
