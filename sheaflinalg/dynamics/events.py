"""First sign change of sums of decaying exponentials (event location of the exact heat flow).

In a segment every watched quantity is ``w_j(t) = c_j + sum_k C_jk exp(-mu_k t)``
(``mu_k > 0``) and must stay ``>= 0``; :func:`first_event` returns the first time
one of them goes below ``-r_j``, its round-off (``8 eps (|c_j| + sum_k |C_jk|)``; a
quantity that starts at 0 after an event is not an event again for rounding alone).  No crossing is missed: the time axis is cut into
intervals (a geometric sequence of uniform chunks), and an interval ``[a, b]``
of width ``h`` is cleared for ``w_j`` only by one of two bounds that hold on
the whole interval (derivatives of exponential sums are dominated at the left end):

* first order: ``w(a) + w(b) > h B1(a)`` with ``B1(a) = sum_k mu_k |C_jk| e^{-mu_k a} >= |w'|``;
* second order: ``w(a) >= 0`` and ``w(a) + w'(a) h - B2(a) h^2 / 2 >= 0`` with
  ``B2(a) = sum_k mu_k^2 |C_jk| e^{-mu_k a} >= |w''|`` (the quadratic lower bound is concave).

An interval with ``w(b) < 0`` holds exactly one root if also ``|w'(a)| > h B2(a)``
(``w'`` keeps its sign); it is then refined by :func:`scipy.optimize.brentq` to
machine precision.  Any other interval is cut in ``K`` parts and examined again,
down to a width of ``1e-13 (1 + t)`` (below that a dip under 0 and back is
deeper than ``B1 h``, i.e. round-off, and is ignored).  After a chunk ending at
``T``, ``c_j > sum_k |C_jk| e^{-mu_k T}`` for every ``j`` proves that nothing
changes sign ever again.  The bounds are exact in real arithmetic; in floating
point they are evaluated to round-off.
"""

import numpy as np
from scipy.optimize import brentq

K = 16          # intervals per chunk and per refinement
MIN_WIDTH = 1e-13


def merge_equal_rates(C, mu):
    """``(C, mu)`` with the terms of equal rates (to round-off) added into one.

    A repeated eigenvalue gives terms that may cancel exactly (``0.55 e^{-t} - 0.55 e^{-t}``);
    bounded term by term, such a sum of zero never clears an interval and the scan would cut
    every interval down to its smallest width.  Rates within ``8 eps max(mu)`` of the first of
    their group take its value: the change of ``w`` is below the round-off of :class:`ExponentialSums`.

    Examples
    --------
    >>> C, mu = merge_equal_rates(np.array([[0.55, -0.55, 1.0]]), np.array([1.0, 1.0, 2.0]))
    >>> C.tolist(), mu.tolist()
    ([[0.0, 1.0]], [1.0, 2.0])
    """
    if mu.size < 2:
        return C, mu
    order = np.argsort(mu, kind="stable")
    sorted_mu = mu[order]
    new_group = np.ones(mu.size, dtype=bool)
    tol = 8 * np.finfo(float).eps * sorted_mu[-1]
    start = sorted_mu[0]
    for i in range(1, mu.size):          # a group's rates all lie within tol of its first
        new_group[i] = sorted_mu[i] - start > tol
        start = sorted_mu[i] if new_group[i] else start
    if new_group.all():
        return C, mu
    group = np.cumsum(new_group) - 1
    merged = np.zeros((C.shape[0], int(group[-1]) + 1))
    np.add.at(merged.T, group, C[:, order].T)
    return merged, sorted_mu[new_group]


class ExponentialSums:
    """``w_j(t) = c_j + sum_k C_jk exp(-mu_k t)`` for a set of ``j`` (vectorised over times)."""

    def __init__(self, c, C, mu):
        # Round-off of w at any time: values within it of 0 count as 0 (not as an event).
        self.roundoff = 8 * np.finfo(float).eps * (np.abs(c) + np.abs(C).sum(axis=1))
        self.c, self.C, self.mu = (c,) + merge_equal_rates(C, mu)
        self.absC = np.abs(self.C)

    def values(self, t):
        """``w`` (n_j, n_t), ``w'``, and the bounds ``B1``, ``B2`` at times ``t`` (1-D)."""
        E = np.exp(-np.outer(self.mu, t))
        w = self.c[:, None] + self.C @ E
        dw = -(self.C * self.mu) @ E
        b1 = (self.absC * self.mu) @ E
        b2 = (self.absC * self.mu ** 2) @ E
        return w, dw, b1, b2

    def one(self, j, t):
        return self.c[j] + self.C[j] @ np.exp(-self.mu * t)

    def never_again(self, T):
        """True if no ``w_j`` can be negative at any time ``>= T``."""
        return bool(np.all(self.c > self.absC @ np.exp(-self.mu * T)))


def _root(f, j, a, b):
    """Root of ``w_j`` in ``[a, b]`` (``w_j(b) < -roundoff``); ``a`` if ``w_j(a) <= 0`` already."""
    if f.one(j, a) <= 0:
        return a
    return brentq(lambda t: f.one(j, t), a, b, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=200)


def _scan(f, grid, w, dw, b1, b2):
    """First event on the intervals of ``grid`` (values given), or None."""
    h = np.diff(grid)
    r = f.roundoff[:, None]
    wa, wb = w[:, :-1] + r, w[:, 1:] + r
    first = wa + wb > h * b1[:, :-1]
    second = (wa >= 0) & (wa + dw[:, :-1] * h - 0.5 * b2[:, :-1] * h * h >= 0)
    safe = first | second
    neg = wb < 0
    single = neg & (wa >= 0) & (np.abs(dw[:, :-1]) > h * b2[:, :-1])
    bad = ~safe | neg
    for i in np.flatnonzero(bad.any(axis=0)):
        a, b = grid[i], grid[i + 1]
        if (bad[:, i] == single[:, i]).all() or b - a <= MIN_WIDTH * (1.0 + a):
            roots = [_root(f, j, a, b) for j in np.flatnonzero(neg[:, i])]
            if roots:
                t = min(roots)
                return t, int(np.flatnonzero(neg[:, i])[int(np.argmin(roots))])
            continue            # only unresolvable dips of round-off size
        sub = np.linspace(a, b, K + 1)
        found = _scan(f, sub, *f.values(sub))
        if found is not None:
            return found
    return None


def first_event(f, horizon, h0):
    """First time in ``(0, horizon]`` at which some ``w_j < 0``: ``(t, j)``, or ``None``.

    ``h0`` is the spacing of the first chunk (doubled chunk after chunk).
    """
    t, h = 0.0, float(h0)
    while t < horizon:
        grid = np.minimum(t + h * np.arange(K + 1), horizon)
        grid = np.unique(grid)
        found = _scan(f, grid, *f.values(grid))
        if found is not None:
            return found
        t = float(grid[-1])
        if f.never_again(t):
            return None
        h *= 2.0
    return None
