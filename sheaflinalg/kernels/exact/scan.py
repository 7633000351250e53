"""Event location of the exact flow (compiled once, used by every path): the first sign change of the
watched sums, Brent's method and the time a segment takes to come within ``tol`` of its fixed point."""

import numpy as np
from numba import njit

from .structs import EPS, ScanWorkspace, Sums

K = 16                 # intervals per chunk and per refinement (as events.py)
MIN_WIDTH = 1e-13
MAX_DEPTH = 32         # refinement levels: a chunk of width up to 1e25 reaches MIN_WIDTH


@njit(cache=True, nogil=True)
def _fun(mode, j, t, c, C, mu):
    """mode 0: ``w_j(t)``; mode 1: the convergence gap ``0.5 log(sum C_0i e^{-2 mu_i t}) + c_0``."""
    if mode == 0:
        acc = c[j]
        for i in range(mu.size):
            acc += C[j, i] * np.exp(-mu[i] * t)
        return acc
    acc = 0.0
    for i in range(mu.size):
        acc += C[0, i] * np.exp(-2.0 * mu[i] * t)
    return 0.5 * np.log(acc) + c[0]


@njit(cache=True, nogil=True)
def brent(mode, j, c, C, mu, xa, xb, xtol, rtol, maxiter):
    """Root of ``_fun`` in ``[xa, xb]`` (a sign change), Brent's method as scipy's ``brentq``.

    Parameters
    ----------
    mode : int
        0: ``w_j``; 1: the convergence gap (see ``_fun``).
    j : int
        Watched row (mode 0).
    c, C, mu : ndarray
        The sums.
    xa, xb : float
        The bracket.
    xtol, rtol : float
        Tolerances, as ``brentq``'s.
    maxiter : int
    """
    xpre, xcur = xa, xb
    xblk = fblk = spre = scur = 0.0
    fpre = _fun(mode, j, xpre, c, C, mu)
    fcur = _fun(mode, j, xcur, c, C, mu)
    if fpre == 0.0:
        return xpre
    if fcur == 0.0:
        return xcur
    for _ in range(maxiter):
        if fpre != 0.0 and fcur != 0.0 and ((fpre < 0.0) != (fcur < 0.0)):
            xblk, fblk = xpre, fpre
            spre = scur = xcur - xpre
        if abs(fblk) < abs(fcur):
            xpre, xcur, xblk = xcur, xblk, xcur
            fpre, fcur, fblk = fcur, fblk, fcur
        delta = (xtol + rtol * abs(xcur)) / 2.0
        sbis = (xblk - xcur) / 2.0
        if fcur == 0.0 or abs(sbis) < delta:
            return xcur
        if abs(spre) > delta and abs(fcur) < abs(fpre):
            if xpre == xblk:
                stry = -fcur * (xcur - xpre) / (fcur - fpre)
            else:
                dpre = (fpre - fcur) / (xpre - xcur)
                dblk = (fblk - fcur) / (xblk - xcur)
                stry = -fcur * (fblk * dblk - fpre * dpre) / (dblk * dpre * (fblk - fpre))
            if 2.0 * abs(stry) < min(abs(spre), 3.0 * abs(sbis) - delta):
                spre, scur = scur, stry
            else:
                spre, scur = sbis, sbis
        else:
            spre, scur = sbis, sbis
        xpre, fpre = xcur, fcur
        if abs(scur) > delta:
            xcur += scur
        else:
            xcur += delta if sbis > 0 else -delta
        fcur = _fun(mode, j, xcur, c, C, mu)
    return xcur


@njit(cache=True, nogil=True)
def convergence_time(gamma, mu, tol):
    """Smallest ``t`` with ``||sum_i gamma_i e^{-mu_i t} y_i|| <= tol`` (``y_i`` orthonormal): the time a
    segment takes to come within ``tol`` of its fixed point (every path of the exact flow uses it).

    Parameters
    ----------
    gamma : ndarray, shape (k,)
        Coefficients at the start.
    mu : ndarray, shape (k,)
        Rates, all > 0.
    tol : float
    """
    norm = np.sqrt(np.dot(gamma, gamma))
    if norm <= tol:
        return 0.0
    if tol <= 0.0:
        return np.inf
    upper = np.log(norm / tol) / mu.min()
    c = np.array([-np.log(tol)])
    C = (gamma * gamma).reshape(1, gamma.size)
    if _fun(1, 0, upper, c, C, mu) < 0.0:
        return brent(1, 0, c, C, mu, 0.0, upper, 1e-300, 4 * EPS, 100)
    return upper


@njit(cache=True, nogil=True)
def _values(d, npts, f, nw, ws):
    """``w``, ``w'`` and the bounds ``B1``, ``B2`` at the ``npts`` grid points of level ``d`` of ``ws``."""
    c, C, Cmu, aCmu, aCmu2, mu = f.c, f.C, f.Cmu, f.aCmu, f.aCmu2, f.mu
    grid, W, DW, B1, B2 = ws.grid, ws.W, ws.DW, ws.B1, ws.B2
    k = mu.size
    E = np.empty(k)
    for m in range(npts):
        for i in range(k):
            E[i] = np.exp(-mu[i] * grid[d, m])
        for j in range(nw):
            w, dw, b1, b2 = c[j], 0.0, 0.0, 0.0
            for i in range(k):
                w += C[j, i] * E[i]
                dw -= Cmu[j, i] * E[i]
                b1 += aCmu[j, i] * E[i]
                b2 += aCmu2[j, i] * E[i]
            W[d, j, m], DW[d, j, m], B1[d, j, m], B2[d, j, m] = w, dw, b1, b2


@njit(cache=True, nogil=True)
def _root(j, a, b, f):
    """Root of ``w_j`` in ``[a, b]``; ``a`` if ``w_j(a) <= 0`` already."""
    if _fun(0, j, a, f.c, f.C, f.mu) <= 0.0:
        return a
    return brent(0, j, f.c, f.C, f.mu, a, b, 1e-300, 4 * EPS, 200)


@njit(cache=True, nogil=True)
def _scan(f, nw, ws):
    """First event on the intervals of level 0's grid (values given), depth first; ``(t, j)`` or ``(-1, -1)``."""
    r, grid, npts, pos, W, DW, B1, B2 = f.r, ws.grid, ws.npts, ws.pos, ws.W, ws.DW, ws.B1, ws.B2
    depth = 0
    pos[0] = 0
    while depth >= 0:
        i = pos[depth]
        if i >= npts[depth] - 1:
            depth -= 1
            if depth >= 0:
                pos[depth] += 1
            continue
        a, b = grid[depth, i], grid[depth, i + 1]
        h = b - a
        any_bad, all_single = False, True
        for j in range(nw):
            wa, wb = W[depth, j, i] + r[j], W[depth, j, i + 1] + r[j]
            dwa, b1, b2 = DW[depth, j, i], B1[depth, j, i], B2[depth, j, i]
            safe = (wa + wb > h * b1) or (wa >= 0 and wa + dwa * h - 0.5 * b2 * h * h >= 0)
            neg = wb < 0
            single = neg and wa >= 0 and abs(dwa) > h * b2
            bad = (not safe) or neg
            any_bad = any_bad or bad
            if bad != single:
                all_single = False
        if not any_bad:
            pos[depth] += 1
            continue
        if all_single or h <= MIN_WIDTH * (1.0 + a) or depth + 1 >= MAX_DEPTH:
            best, best_j = np.inf, -1
            for j in range(nw):
                if W[depth, j, i + 1] + r[j] < 0:
                    t = _root(j, a, b, f)
                    if t < best:
                        best, best_j = t, j
            if best_j >= 0:
                return best, best_j
            pos[depth] += 1           # only unresolvable dips of round-off size
            continue
        d = depth + 1
        step = h / K
        for m in range(K + 1):
            grid[d, m] = a + m * step
        grid[d, K] = b
        npts[d] = K + 1
        pos[d] = 0
        _values(d, K + 1, f, nw, ws)
        depth = d
    return -1.0, -1


@njit(cache=True, nogil=True)
def first_event(c, C, r, mu, nw, horizon, h0, ws):
    """First time in ``(0, horizon]`` at which some ``w_j < -r_j`` (``r``: round-off): ``(t, j)``, or ``(-1, -1)``.

    No crossing is missed: the time axis is cut into chunks of ``K`` intervals (the first of width
    ``h0``, doubled chunk after chunk); an interval is cleared for ``w_j`` by a first-order bound
    (``w(a) + w(b) > h B1(a)``) or a second-order one, holds a single root when ``w'`` keeps its
    sign, and is otherwise cut in ``K`` parts (at most ``MAX_DEPTH`` levels, down to a width of
    ``MIN_WIDTH (1 + t)``); a root is refined by Brent's method.  After a chunk ending at ``T``,
    ``c_j > sum_i |C_ji| e^{-mu_i T}`` for every ``j`` proves that nothing changes sign again.

    Parameters
    ----------
    c : ndarray, shape (>= nw,)
    C : ndarray, shape (>= nw, k)
        Terms of equal rates must be merged (a sum of zero never clears an interval).
    r : ndarray, shape (>= nw,)
        Round-off of each ``w_j``.
    mu : ndarray, shape (k,)
        Rates, all > 0.
    nw : int
        Watched rows.
    horizon : float
    h0 : float
        Width of the first chunk's intervals.
    ws : ScanWorkspace
        For at least ``nw`` rows (:func:`scan_workspace`).
    """
    grid, npts = ws.grid, ws.npts
    k = mu.size
    Cmu = np.empty((nw, k))
    aCmu = np.empty((nw, k))
    aCmu2 = np.empty((nw, k))
    for j in range(nw):
        for i in range(k):
            Cmu[j, i] = C[j, i] * mu[i]
            aCmu[j, i] = abs(C[j, i]) * mu[i]
            aCmu2[j, i] = abs(C[j, i]) * mu[i] * mu[i]
    f = Sums(c, C, r, mu, Cmu, aCmu, aCmu2)
    t, h = 0.0, h0
    while t < horizon and t < 1e300:
        n = 0
        for m in range(K + 1):
            g = min(t + h * m, horizon)
            if n == 0 or g > grid[0, n - 1]:
                grid[0, n] = g
                n += 1
        npts[0] = n
        _values(0, n, f, nw, ws)
        te, je = _scan(f, nw, ws)
        if je >= 0:
            return te, je
        t = grid[0, n - 1]
        never = True
        for j in range(nw):
            s = 0.0
            for i in range(k):
                s += abs(C[j, i]) * np.exp(-mu[i] * t)
            if not c[j] > s:
                never = False
                break
        if never:
            return -1.0, -1
        h *= 2.0
    return -1.0, -1


@njit(cache=True, nogil=True)
def scan_workspace(n_watch):
    """:class:`~.structs.ScanWorkspace` of :func:`first_event` for up to ``n_watch`` watched rows
    (``MAX_DEPTH`` levels)."""
    nw = max(n_watch, 1)
    return ScanWorkspace(np.empty((MAX_DEPTH, K + 1)), np.zeros(MAX_DEPTH, np.int64), np.zeros(MAX_DEPTH, np.int64),
                         np.empty((MAX_DEPTH, nw, K + 1)), np.empty((MAX_DEPTH, nw, K + 1)),
                         np.empty((MAX_DEPTH, nw, K + 1)), np.empty((MAX_DEPTH, nw, K + 1)))
