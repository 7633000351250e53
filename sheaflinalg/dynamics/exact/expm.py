"""The expm path of the exact flow (large N): segments propagated by ``expm_multiply``, no eigenvectors.

In a segment the free coordinates follow ``omega_F(t) = omega*_F + r(t)`` with
``r(t) = exp(-alpha L (t - start)) r_0`` (``L = L_FF`` of a
:class:`~sheaflinalg.dynamics.exact.regions.SparseRegion`, applied as ``D_F^T D_F``);
:func:`scipy.sparse.linalg.expm_multiply` computes ``r`` on grids of times (its
``start=0, stop, num`` form: ``start != 0`` is inaccurate, scipy issue 16311).

Event location needs, for each watched
``w_j(t) = c_j + A_j r(t)``, bounds on ``|w_j'|`` and ``|w_j''|`` over
``[a, b]`` known at ``a``.  ``L`` is symmetric positive definite and commutes
with ``exp(-alpha L s)``, so ``||L^k r(t)|| = ||exp(-alpha L (t - a)) L^k r(a)||``
is non-increasing, and for ``t >= a``

* ``|w_j'(t)| = alpha |A_j L r(t)| <= alpha ||A_j|| ||L r(a)||``,
* ``|w_j''(t)| <= alpha^2 ||A_j|| ||L^2 r(a)||``,
* ``|w_j(t) - c_j| <= ||A_j|| ||r(T)||`` for ``t >= T``: ``c_j > ||A_j|| ||r(T)||``
  for every ``j`` proves that nothing changes sign after ``T``.

``||r(t)||`` is non-increasing too: the time to come within ``tol`` of the
fixed point is found by doubling and bisection.  scipy estimates matrix-power
norms with the global NumPy random generator; every call here runs with a fixed
seed and restores the caller's generator state, so results are reproducible.

The event scan here (:func:`first_event`) is the compiled one's
(:func:`sheaflinalg.kernels.exact.scan.first_event`: same chunks, bounds and
subdivision) written over a provider of values and bounds, because ``w_j`` is
no sum of exponentials on this path: :class:`ExpmSums` provides them.
"""

import threading

import numpy as np
from scipy.optimize import brentq
from scipy.sparse.linalg import expm_multiply

from ...kernels.exact.scan import K, MIN_WIDTH
from .regions import RegionSegment

_LOCK = threading.Lock()
_SEED = 13
ROUNDOFF = 16 * np.finfo(float).eps


def _seeded_expm(A, B, **kw):
    with _LOCK:
        saved = np.random.get_state()
        np.random.seed(_SEED)
        try:
            return expm_multiply(A, B, **kw)
        finally:
            np.random.set_state(saved)


def propagate(region, alpha, r, dt):
    """``exp(-alpha L dt) r`` (``dt >= 0``)."""
    if dt <= 0 or not r.size:
        return r.copy()
    s = -alpha * dt
    return _seeded_expm(s * region.L, r, traceA=s * region.trace)


def propagate_grid(region, alpha, r, span, num):
    """``exp(-alpha L t_k) r`` at ``num`` evenly spaced ``t_k`` in ``[0, span]``: shape (num, n)."""
    if not r.size:
        return np.zeros((num, 0))
    return _seeded_expm(-alpha * region.L, r, start=0.0, stop=span, num=num, endpoint=True,
                        traceA=-alpha * region.trace)


class Flow:
    """``r(t)`` of one segment (``t`` relative to its start), with the last grids kept as anchors."""

    def __init__(self, region, alpha, r0):
        self.region, self.alpha, self.r0 = region, alpha, r0
        self._at, self._ar = np.zeros(1), r0[None, :]

    def _anchor(self, t):
        i = int(np.searchsorted(self._at, t, side="right")) - 1
        return self._at[i], self._ar[i]

    def at(self, t):
        """``r(t)`` for one time, from the nearest earlier anchor."""
        a, ra = self._anchor(t)
        return propagate(self.region, self.alpha, ra, t - a)

    def states(self, ts, remember=True):
        """``r`` at sorted times ``ts`` (1-D, ascending): shape (n_t, n)."""
        ts = np.asarray(ts, dtype=np.float64)
        a, r = self._anchor(ts[0])
        d = np.diff(ts)
        if ts.size > 2 and d[0] > 0 and np.all(np.abs(d - d[0]) <= 1e-9 * d[0]):
            first = propagate(self.region, self.alpha, r, ts[0] - a)
            R = propagate_grid(self.region, self.alpha, first, ts[-1] - ts[0], ts.size)
        else:
            R = np.empty((ts.size, self.r0.size))
            for k, t in enumerate(ts):
                r = propagate(self.region, self.alpha, r, t - a)
                a, R[k] = t, r
        if remember:                # the start and the latest grid
            self._at = np.concatenate([[0.0], ts])
            self._ar = np.vstack([self.r0[None, :], R])
        return R


class ExpmSums:
    """Watched quantities ``w_j(t) = c_j + A_j r(t)`` of an ``expm`` segment (the provider of
    :func:`first_event`: ``c``, ``roundoff``, ``values``, ``one``, ``never_again``).
    """

    def __init__(self, c, flow):
        region = flow.region
        self.c, self.flow, self.alpha = c, flow, flow.alpha
        self.A, self.A_norm = region.A_free, region.A_norm
        self.roundoff = ROUNDOFF * (np.abs(c) + self.A_norm * np.linalg.norm(flow.r0))

    def values(self, t):
        """``w`` (n_j, n_t), ``w'``, and the bounds ``B1 >= |w'|``, ``B2 >= |w''|`` on ``[t, inf)``."""
        R = self.flow.states(t).T
        LR = self.flow.region.apply(R)
        L2R = self.flow.region.apply(LR)
        w = self.c[:, None] + self.A @ R
        dw = -self.alpha * (self.A @ LR)
        b1 = self.alpha * np.outer(self.A_norm, np.linalg.norm(LR, axis=0))
        b2 = self.alpha ** 2 * np.outer(self.A_norm, np.linalg.norm(L2R, axis=0))
        return w, dw, b1, b2

    def one(self, j, t):
        lo, hi = self.A.indptr[j], self.A.indptr[j + 1]
        return self.c[j] + self.A.data[lo:hi] @ self.flow.at(t)[self.A.indices[lo:hi]]

    def never_again(self, T):
        """True if no ``w_j`` can be negative at any time ``>= T``."""
        return bool(np.all(self.c > self.A_norm * np.linalg.norm(self.flow.at(T))))

    def first_event(self, horizon, h0):
        """First time in ``(0, horizon]`` some ``w_j`` goes below its round-off: ``(t, j)`` or None."""
        return first_event(self, horizon, h0)


def time_to_tol(flow, tol, limit, first_step):
    """Smallest ``t <= limit`` with ``||r(t)|| <= tol`` (relative 1e-13), or ``inf`` if none."""
    if np.linalg.norm(flow.r0) <= tol:
        return 0.0
    if tol <= 0:
        return np.inf
    lo, r_lo, step = 0.0, flow.r0, float(first_step)
    while True:                     # doubling: ||r|| is non-increasing
        t = min(lo + step, limit)
        r = propagate(flow.region, flow.alpha, r_lo, t - lo)
        if np.linalg.norm(r) <= tol:
            hi = t
            break
        if t >= limit:
            return np.inf
        lo, r_lo, step = t, r, 2 * step
    while hi - lo > 1e-13 * hi:
        mid = 0.5 * (lo + hi)
        r = propagate(flow.region, flow.alpha, r_lo, mid - lo)
        if np.linalg.norm(r) <= tol:
            hi = mid
        else:
            lo, r_lo = mid, r
    return hi


class ExpmSegment(RegionSegment):
    """A segment of the ``expm_multiply`` path: ``omega_F(t) = star_F + exp(-alpha L (t - start)) beta``
    (``beta = r_0`` itself: the free part of ``omega(start) - star``)."""

    __slots__ = ()

    def state(self, region, t):
        """States at times ``t`` (1-D array, any order), shape (n_t, n)."""
        t = np.atleast_1d(np.asarray(t, dtype=np.float64)) - self.start
        order = np.argsort(t, kind="stable")
        out = np.repeat(self.star[None, :], t.size, axis=0)
        if t.size:
            R = Flow(region, self.alpha, self.beta).states(np.maximum(t[order], 0.0), remember=False)
            out[order[:, None], region.free[None, :]] += R
        return out

    def first_step(self, region):
        return 0.25 / (self.alpha * region.lam_bound) if region.lam_bound > 0 else 1.0

    def convergence_time(self, region, tol, limit):
        return time_to_tol(Flow(region, self.alpha, self.beta), tol, limit, self.first_step(region))

    def sums(self, region, c):
        return ExpmSums(c, Flow(region, self.alpha, self.beta))


# ---------------------------------------------------------------- the event scan over a provider

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
