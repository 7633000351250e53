"""Compiled engine of the exact heat flow: Krylov segments, event scan, Filippov classification.

In a region (active units, sliding units) the free coordinates ``F`` follow
``d omega_F/dt = -alpha (L_FF omega_F + c)``.  With ``g0 = D_F^T (D omega0 + e)``
(the force at the segment's start) the whole trajectory lies in the Krylov space
``K(L_FF, g0)``.  Lanczos with full reorthogonalisation (twice) from ``g0`` runs
until ``beta_k <= KRYLOV_TOL * ||T||`` (the space is invariant to round-off: the
grade) or ``k = |F|``; with ``T = S diag(theta) S^T`` and
``gamma = ||g0|| S^T e1 / theta``::

    omega*_F = omega0_F - V S gamma,   omega_F(t) = omega*_F + V S (exp(-alpha theta t) * gamma).

The watched quantities of :mod:`sheaflinalg.dynamics.events` are then
``w_j(t) = c_j + sum_i C_ji exp(-mu_i t)`` with ``mu = alpha theta``, and the event
scan below is that module's, compiled (same bounds, chunks, subdivision on an
explicit stack, ``never_again``; Brent's method as in scipy's ``brentq``), with a
round-off rule that adds the rounding of the Krylov representation (:func:`watched_rows`).  A posteriori, the Krylov error of a segment's states is at most
``beta_k ||g0|| (|e_k^T T^-1 e_1| / theta_min + sum_i |S_ki S_1i| / theta_i^2)``
(``lambda_min(L_FF)`` taken as ``theta_min``): see :func:`segment_setup`.

Held coordinates (hard pins, ``z`` of sliding units) are zero in every Krylov
vector.  ``D = D0 - sum_{u active} e_{ea_row(u)} e_{z(u)}^T`` is applied matrix-free.
No bounds are checked: the Python side (:mod:`sheaflinalg.dynamics.exact.krylov`)
sizes every array.

The kernels take named structures (numba compiles namedtuples): :class:`ExactOperator`
(the sparse operator of the flow and its hard pins), :class:`SegmentRecords` and
:class:`EventRecords` (the output buffers), :class:`SampleResults` (per-sample results),
:class:`ScanWorkspace` (the event scan's levels) and :class:`Sums` (the watched sums of a segment).
"""

from collections import namedtuple

import numpy as np
from numba import njit

#: The flow's operator: ``D0`` (CSR ``d_*``) and ``D0^T`` (CSR ``t_*``) on the free coordinates with every
#: unit inactive, the activation-edge row ``ea_rows``, free positions ``z_index``, ``a_index`` of every
#: hidden unit, the hard-pin mask ``held_pin`` (bool per free coordinate) and ``P`` (CSR ``p_*``,
#: ``p_j = (P omega)_j + p0_j``, the weight-edge force on ``z_j``).
ExactOperator = namedtuple("ExactOperator", ["d_ptr", "d_idx", "d_val", "t_ptr", "t_idx", "t_val", "ea_rows",
                                             "z_index", "a_index", "held_pin", "p_ptr", "p_idx", "p_val"])
#: Segment records: sample, start and end times, state at the start, active and sliding masks,
#: Krylov dimension, a-posteriori Krylov bound (one row per segment).
SegmentRecords = namedtuple("SegmentRecords", ["sample", "start", "end", "state", "active", "sliding", "k", "bound"])
#: Event records: time, sample, unit, kind (``CROSSING_UP`` ...), the unit's mask after the event.
EventRecords = namedtuple("EventRecords", ["time", "sample", "unit", "kind", "active"])
#: Per-sample results: stopping time, converged, final state, fixed point of the last region, handed back.
SampleResults = namedtuple("SampleResults", ["time", "converged", "final", "star", "fallback"])
#: The event scan's workspace, ``MAX_DEPTH`` levels: grid points, their number, position, ``w``, ``w'``,
#: and the bounds ``B1``, ``B2`` at every point (:func:`scan_workspace`).
ScanWorkspace = namedtuple("ScanWorkspace", ["grid", "npts", "pos", "W", "DW", "B1", "B2"])
#: Watched sums ``w_j(t) = c_j + sum_i C_ji exp(-mu_i t)`` with round-off ``r``, and the products the
#: bounds use: ``C mu``, ``|C| mu``, ``|C| mu^2``.
Sums = namedtuple("Sums", ["c", "C", "r", "mu", "Cmu", "aCmu", "aCmu2"])

K = 16                 # intervals per chunk and per refinement (as events.py)
MIN_WIDTH = 1e-13
MAX_DEPTH = 32         # refinement levels: a chunk of width up to 1e25 reaches MIN_WIDTH
KRYLOV_TOL = 1e-12     # Lanczos breakdown: beta_k <= KRYLOV_TOL * ||T|| (Gershgorin estimate)
EPS = np.finfo(np.float64).eps

WATCH_Z, WATCH_P, WATCH_Q = 0, 1, 2
CROSSING_UP, CROSSING_DOWN, SLIDING_START, SLIDING_END = 0, 1, 2, 3
EVENT_KINDS = ("crossing_up", "crossing_down", "sliding_start", "sliding_end")   # the names of these codes

# Status of one sample / of a run.
OK, FULL, CAP = 0, 1, 2
# counters of exact_run
C_NEXT, C_NSEG, C_NEV, C_STATUS = 0, 1, 2, 3
N_COUNTERS = 4


@njit(cache=True, nogil=True)
def apply_d(x, op, active, out):
    """``out = D x`` (edges) for the pattern ``active``.

    Parameters
    ----------
    x : ndarray, shape (n,)
        Free coordinates.
    op : ExactOperator
    active : ndarray of bool, shape (n_units,)
    out : ndarray, shape (n_edges,)
        Written.
    """
    d_ptr, d_idx, d_val, ea_rows, z_index = op.d_ptr, op.d_idx, op.d_val, op.ea_rows, op.z_index
    for r in range(out.size):
        acc = 0.0
        for q in range(d_ptr[r], d_ptr[r + 1]):
            acc += d_val[q] * x[d_idx[q]]
        out[r] = acc
    for u in range(active.size):
        if active[u]:
            out[ea_rows[u]] -= x[z_index[u]]


@njit(cache=True, nogil=True)
def apply_dt(y, op, active, held, out):
    """``out = D^T y`` with held coordinates zeroed (``D_F^T y``).

    Parameters
    ----------
    y : ndarray, shape (n_edges,)
    op : ExactOperator
    active : ndarray of bool, shape (n_units,)
    held : ndarray of bool, shape (n,)
        Hard pins and the ``z`` of sliding units.
    out : ndarray, shape (n,)
        Written.
    """
    t_ptr, t_idx, t_val, ea_rows, z_index = op.t_ptr, op.t_idx, op.t_val, op.ea_rows, op.z_index
    for c in range(out.size):
        acc = 0.0
        for q in range(t_ptr[c], t_ptr[c + 1]):
            acc += t_val[q] * y[t_idx[q]]
        out[c] = acc
    for u in range(active.size):
        if active[u]:
            out[z_index[u]] -= y[ea_rows[u]]
    for c in range(out.size):
        if held[c]:
            out[c] = 0.0


@njit(cache=True, nogil=True)
def lanczos(g0, op, active, held, kmax, n_free, V, alpha_, beta_, edge_buf):
    """Lanczos with full reorthogonalisation (twice) from ``g0`` (norm > 0) on ``L_FF``.

    Parameters
    ----------
    g0 : ndarray, shape (n,)
        Start vector (zero on held coordinates).
    op : ExactOperator
    active : ndarray of bool, shape (n_units,)
    held : ndarray of bool, shape (n,)
    kmax : int
        Most vectors.
    n_free : int
        Free coordinates (the grade is at most this).
    V : ndarray, shape (>= kmax, n)
        Filled: ``V[:k]``, orthonormal rows.
    alpha_, beta_ : ndarray, shape (>= kmax,)
        Filled: the tridiagonal ``T``.
    edge_buf : ndarray, shape (n_edges,)
        Workspace.

    Returns
    -------
    k : int
    reached : bool
        The space is invariant (to round-off) or ``k = n_free``.
    """
    n = g0.size
    nrm = np.sqrt(np.dot(g0, g0))
    for i in range(n):
        V[0, i] = g0[i] / nrm
    w = np.empty(n)
    h = np.empty(kmax)
    t_norm = 0.0
    for j in range(kmax):
        apply_d(V[j], op, active, edge_buf)
        apply_dt(edge_buf, op, active, held, w)
        a = 0.0                                  # alpha_j = V[j] . L V[j]: the V[j] coefficients removed
        for _ in range(2):                       # classical Gram-Schmidt, twice
            for i in range(j + 1):
                h[i] = np.dot(V[i], w)
            for i in range(j + 1):
                hi = h[i]
                for m in range(n):
                    w[m] -= hi * V[i, m]
            a += h[j]
        b = np.sqrt(np.dot(w, w))
        alpha_[j] = a
        beta_[j] = b
        t_norm = max(t_norm, abs(a) + b + (beta_[j - 1] if j > 0 else 0.0))
        if b <= KRYLOV_TOL * t_norm or j + 1 >= n_free:
            return j + 1, True
        if j + 1 >= kmax:
            return j + 1, False
        for m in range(n):
            V[j + 1, m] = w[m] / b
    return kmax, False


@njit(cache=True, nogil=True)
def watched_rows(op, active, sliding, p0s, star, Yt, gamma, omega0, unit, kind, c, C, r):
    """Watched quantities ``w_j = c_j + sum_i C_ji exp(-mu_i t)`` of the segment; returns their number.

    ``s_j z_j`` for units neither sliding nor hard-pinned; ``p_j`` and ``-(p_j + a_j)`` for sliding ones.
    ``r`` gets their round-off: the dense path's ``8 eps (|c_j| + sum_i |C_ji|)`` plus
    ``8 eps (|w_j(0)| + ||A_j||_1 ||gamma||)``: ``c_j = A_j (omega0 - Y gamma)`` carries the rounding
    of ``omega0`` and of the Krylov basis ``Y`` (orthonormal columns, entries exact to ``eps`` absolute).

    Parameters
    ----------
    op : ExactOperator
    active, sliding : ndarray of bool, shape (n_units,)
        The segment's region.
    p0s : ndarray, shape (n_units,)
        The sample's constants of ``p``.
    star, Yt, gamma : ndarray
        The segment's representation (:func:`segment_setup`).
    omega0 : ndarray, shape (n,)
        State at the segment's start.
    unit, kind, c, r : ndarray, shape (>= 2 n_units,)
        Written: unit, kind (``WATCH_*``), ``c_j`` and round-off of every watched row.
    C : ndarray, shape (>= 2 n_units, k)
        Written: the coefficients.
    """
    held_pin, z_index, a_index, p_ptr, p_idx, p_val = op.held_pin, op.z_index, op.a_index, op.p_ptr, op.p_idx, \
        op.p_val
    g_norm = np.sqrt(np.dot(gamma, gamma))
    k = gamma.size
    nw = 0
    for u in range(active.size):
        zi = z_index[u]
        if sliding[u]:
            p, p_start = p0s[u], p0s[u]
            for q in range(p_ptr[u], p_ptr[u + 1]):
                p += p_val[q] * star[p_idx[q]]
                p_start += p_val[q] * omega0[p_idx[q]]
            ai = a_index[u]
            p_abs = 0.0
            for q in range(p_ptr[u], p_ptr[u + 1]):
                p_abs += abs(p_val[q])
            r[nw] = abs(p_start) + p_abs * g_norm
            r[nw + 1] = abs(p_start + omega0[ai]) + (p_abs + 1.0) * g_norm
            for i in range(k):
                acc = 0.0
                for q in range(p_ptr[u], p_ptr[u + 1]):
                    acc += p_val[q] * Yt[i, p_idx[q]]
                C[nw, i] = acc * gamma[i]
                C[nw + 1, i] = -(acc + Yt[i, ai]) * gamma[i]
            c[nw], unit[nw], kind[nw] = p, u, WATCH_P
            c[nw + 1], unit[nw + 1], kind[nw + 1] = -(p + star[ai]), u, WATCH_Q
            nw += 2
        elif not held_pin[zi]:
            sgn = 1.0 if active[u] else -1.0
            for i in range(k):
                C[nw, i] = sgn * Yt[i, zi] * gamma[i]
            c[nw], unit[nw], kind[nw] = sgn * star[zi], u, WATCH_Z
            r[nw] = abs(omega0[zi]) + g_norm
            nw += 1
    for j in range(nw):
        s = abs(c[j]) + r[j]
        for i in range(k):
            s += abs(C[j, i])
        r[j] = 8 * EPS * s
    return nw


@njit(cache=True, nogil=True)
def segment_setup(omega, e_s, alpha, active, sliding, op, kmax, V, star):
    """The segment's representation from its start state ``omega``.

    Writes ``star`` (fixed point, full vector) and returns ``(status, Yt, mu, gamma, bound)``:
    ``Yt`` (k, n) the orthonormal directions ``(V S)^T``, ``mu = alpha theta``, ``gamma`` the
    coefficients at the start, and ``bound``, the a-posteriori Krylov error of the states:
    ``beta_k ||g0|| (|e_k^T T^-1 e_1| / theta_min + sum_i |S_ki S_1i| / theta_i^2)`` (the error of
    the fixed point from its residual, ``lambda_min(L_FF)`` taken as ``theta_min``, plus the
    flow's defect ``beta_k v_(k+1) e_k^T exp(-alpha T t) T^-1 e_1 ||g0||`` integrated over time).  ``status`` is ``CAP`` when ``kmax`` vectors do not reach the grade.

    Parameters
    ----------
    omega : ndarray, shape (n,)
    e_s : ndarray, shape (n_edges,)
        The sample's constant edge term.
    alpha : float
    active, sliding : ndarray of bool, shape (n_units,)
    op : ExactOperator
    kmax : int
    V : ndarray, shape (>= min(kmax, n), n)
        Lanczos workspace.
    star : ndarray, shape (n,)
        Written: the fixed point.
    """
    n = omega.size
    z_index = op.z_index
    held = op.held_pin.copy()
    n_free = 0
    for u in range(sliding.size):
        if sliding[u]:
            held[z_index[u]] = True
    for i in range(n):
        if not held[i]:
            n_free += 1
    edge = np.empty(e_s.size)
    apply_d(omega, op, active, edge)
    for r in range(edge.size):
        edge[r] += e_s[r]
    g0 = np.empty(n)
    apply_dt(edge, op, active, held, g0)
    g_norm = np.sqrt(np.dot(g0, g0))
    star[:] = omega
    if g_norm == 0.0 or n_free == 0:
        return OK, np.zeros((0, n)), np.zeros(0), np.zeros(0), 0.0
    al = np.empty(kmax)
    be = np.empty(kmax)
    k, reached = lanczos(g0, op, active, held, min(kmax, n_free), n_free, V, al, be, edge)
    if not reached:
        return CAP, np.zeros((0, n)), np.zeros(0), np.zeros(0), 0.0
    T = np.zeros((k, k))
    for i in range(k):
        T[i, i] = al[i]
        if i + 1 < k:
            T[i, i + 1] = T[i + 1, i] = be[i]
    theta, S = np.linalg.eigh(T)
    if theta[0] <= 0.0:              # not positive definite to round-off: let the dense path decide
        return CAP, np.zeros((0, n)), np.zeros(0), np.zeros(0), 0.0
    gamma = np.empty(k)
    Yt = np.zeros((k, n))
    for i in range(k):
        gamma[i] = g_norm * S[0, i] / theta[i]
        for j in range(k):
            sji = S[j, i]
            for m in range(n):
                Yt[i, m] += sji * V[j, m]
    for i in range(k):
        gi = gamma[i]
        for m in range(n):
            star[m] -= Yt[i, m] * gi
    # Krylov error of the states: the fixed point's residual beta_k ||g0|| |e_k^T T^-1 e_1| over
    # lambda_min (taken as theta_min), plus the transient's defect integrated over [0, inf).
    star_part, flow_part = 0.0, 0.0
    for i in range(k):
        w = S[k - 1, i] * S[0, i] / theta[i]
        star_part += w
        flow_part += abs(w) / theta[i]
    bound = be[k - 1] * g_norm * (abs(star_part) / theta[0] + flow_part)
    return OK, Yt, alpha * theta, gamma, bound


@njit(cache=True, nogil=True)
def state_at(star, Yt, mu, gamma, tau, out):
    """``out = star + Yt^T (exp(-mu tau) * gamma)``: the state of a segment at ``tau`` after its start.

    Parameters
    ----------
    star : ndarray, shape (n,)
        Fixed point.
    Yt : ndarray, shape (k, n)
        Orthonormal directions.
    mu, gamma : ndarray, shape (k,)
        Rates and coefficients at the start.
    tau : float
    out : ndarray, shape (n,)
        Written.
    """
    out[:] = star
    for i in range(gamma.size):
        f = np.exp(-mu[i] * tau) * gamma[i]
        for m in range(out.size):
            out[m] += Yt[i, m] * f


# ---------------------------------------------------------------- event location (compiled once, every path)

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



# ---------------------------------------------------------------- one sample, a block of samples

@njit(cache=True, nogil=True)
def force_p(u, omega, p0s, op):
    """``p_u = (P omega)_u + p0_u``: the weight-edge force on ``z_u`` at ``z_u = 0``."""
    p = p0s[u]
    for q in range(op.p_ptr[u], op.p_ptr[u + 1]):
        p += op.p_val[q] * omega[op.p_idx[q]]
    return p


@njit(cache=True, nogil=True)
def classify(u, kind, omega, p0s, op, active, sliding):
    """Apply the event of unit ``u`` (watched row of ``kind``) at ``omega`` (its ``z`` set to 0); returns the event kind.

    Filippov: ``z_u`` reaching 0 slides when both sides push into the surface (``p > 0`` below,
    ``p + a < 0`` above), else it crosses; a sliding unit leaves below (``p`` changed sign) or above.

    Parameters
    ----------
    u : int
    kind : int
        ``WATCH_Z``, ``WATCH_P`` or ``WATCH_Q``.
    omega : ndarray, shape (n,)
        State at the event (``z_u`` set to 0 here).
    p0s : ndarray, shape (n_units,)
    op : ExactOperator
    active, sliding : ndarray of bool, shape (n_units,)
        The region, updated.
    """
    p = force_p(u, omega, p0s, op)
    q_ = p + omega[op.a_index[u]]
    omega[op.z_index[u]] = 0.0
    if kind == WATCH_Z:
        if (active[u] and p > 0) or ((not active[u]) and q_ < 0):
            sliding[u], active[u] = True, False
            return SLIDING_START
        active[u] = not active[u]
        return CROSSING_UP if active[u] else CROSSING_DOWN
    sliding[u] = False
    active[u] = kind == WATCH_Q
    return SLIDING_END


@njit(cache=True, nogil=True)
def initial_region(omega, p0s, op, active, sliding):
    """Pattern ``z >= 0`` at the start; units at ``z = 0`` pushed into the surface from both sides slide.

    Returns the number of sliding units: each opens a sliding episode at ``t = 0`` (a
    ``SLIDING_START`` event at time 0, on every path).

    Parameters
    ----------
    omega : ndarray, shape (n,)
        Start state (pins set).
    p0s : ndarray, shape (n_units,)
    op : ExactOperator
    active, sliding : ndarray of bool, shape (n_units,)
        Written: the initial region.
    """
    n_sliding = 0
    for u in range(active.size):
        zi = op.z_index[u]
        z = omega[zi]
        p = force_p(u, omega, p0s, op)
        sliding[u] = z == 0.0 and p > 0 and p + omega[op.a_index[u]] < 0 and not op.held_pin[zi]
        active[u] = z >= 0 and not sliding[u]
        n_sliding += sliding[u]
    return n_sliding


@njit(cache=True, nogil=True)
def _initial_events(s, sliding, evbuf, ne):
    """The ``SLIDING_START`` events at ``t = 0`` of the units sliding from the start; returns the next record
    (``-1``: the buffer is full)."""
    for u in range(sliding.size):
        if sliding[u]:
            if ne >= evbuf.time.size:
                return -1
            evbuf.time[ne], evbuf.sample[ne], evbuf.unit[ne] = 0.0, s, u
            evbuf.kind[ne], evbuf.active[ne] = SLIDING_START, False
            ne += 1
    return ne


@njit(cache=True, nogil=True)
def _open_segment(segbuf, ns, s, t, omega, active, sliding, k, bound):
    segbuf.sample[ns], segbuf.start[ns], segbuf.end[ns], segbuf.k[ns], segbuf.bound[ns] = s, t, t, k, bound
    segbuf.state[ns, :] = omega
    segbuf.active[ns, :] = active
    segbuf.sliding[ns, :] = sliding


@njit(cache=True, nogil=True)
def _segment_horizon(op, active, sliding, p0s, star, Yt, mu, gamma, omega, t_max, t, tol, watched):
    """Watched rows of the segment (into ``watched`` = (unit, kind, c, C, r)); returns
    ``(nw, consistent, t_conv, horizon)``: the fixed point is consistent with the region when no
    watched quantity is negative there, and then ``t_conv`` is the time to come within ``tol``."""
    unit, kind, c, C, r = watched
    nw = watched_rows(op, active, sliding, p0s, star, Yt, gamma, omega, unit, kind, c, C, r)
    consistent = True
    for j in range(nw):
        if c[j] < -r[j]:
            consistent = False
    t_conv = convergence_time(gamma, mu, tol) if consistent else np.inf
    return nw, consistent, t_conv, min(t_max - t, t_conv)


@njit(cache=True, nogil=True)
def integrate_sample(s, omega0, e_s, p0s, op, alpha, t_max, tol, max_events, kmax, V, ws, segbuf, evbuf, seg0,
                     ev0, final, star):
    """Integrate one sample from ``omega0`` to ``t_max``, its equilibrium or ``max_events`` events.

    Parameters
    ----------
    s : int
        The sample.
    omega0, e_s, p0s : ndarray
        Its start state (pins set), constant edge term and constants of ``p``.
    op : ExactOperator
    alpha, t_max, tol : float
    max_events : int
        The sample stops at its ``max_events``-th event (those at ``t = 0`` count).
    kmax : int
        Lanczos vectors per segment before the sample is handed back (``CAP``).
    V : ndarray
        Lanczos workspace; ``ws`` the scan's (:class:`ScanWorkspace`).
    segbuf : SegmentRecords
    evbuf : EventRecords
    seg0, ev0 : int
        First records to write.
    final, star : ndarray, shape (n,)
        Written: the final state and the fixed point of the last region.

    Returns
    -------
    status, n_seg, n_ev, time, converged
        ``FULL`` when a buffer is full (nothing usable written), ``CAP`` when Lanczos did not
        reach its grade within ``kmax``.
    """
    n_units = op.z_index.size
    omega = omega0.copy()
    active = np.zeros(n_units, dtype=np.bool_)
    sliding = np.zeros(n_units, dtype=np.bool_)
    initial_region(omega, p0s, op, active, sliding)
    ne = _initial_events(s, sliding, evbuf, ev0)
    if ne < 0:
        return FULL, 0, 0, 0.0, False
    unit = np.empty(2 * n_units, dtype=np.int64)
    kind = np.empty(2 * n_units, dtype=np.int64)
    c = np.empty(2 * n_units)
    r = np.empty(2 * n_units)
    t = 0.0
    ns = seg0
    while True:
        if ns >= segbuf.start.size:
            return FULL, 0, 0, 0.0, False
        status, Yt, mu, gamma, bound = segment_setup(omega, e_s, alpha, active, sliding, op, kmax, V, star)
        if status != OK:
            return status, 0, 0, 0.0, False
        _open_segment(segbuf, ns, s, t, omega, active, sliding, gamma.size, bound)
        ns += 1
        if ne - ev0 >= max_events:        # only at t = 0: the events of the initial sliding set
            final[:] = omega
            return OK, ns - seg0, ne - ev0, t, False
        watched = (unit, kind, c, np.empty((2 * n_units, gamma.size)), r)
        nw, consistent, t_conv, horizon = _segment_horizon(op, active, sliding, p0s, star, Yt, mu, gamma, omega,
                                                           t_max, t, tol, watched)
        dt, row = -1.0, -1
        if nw > 0:
            dt, row = first_event(c, watched[3], r, mu, nw, horizon, 0.25 / mu.max() if mu.size else 1.0, ws)
        if row < 0:
            segbuf.end[ns - 1] = t + horizon
            state_at(star, Yt, mu, gamma, horizon, final)
            return OK, ns - seg0, ne - ev0, t + horizon, consistent and t_conv <= t_max - t
        t_new = t + dt
        segbuf.end[ns - 1] = t_new
        state_at(star, Yt, mu, gamma, t_new - t, final)
        omega[:] = final
        if ne >= evbuf.time.size:
            return FULL, 0, 0, 0.0, False
        u = unit[row]
        evbuf.kind[ne] = classify(u, kind[row], omega, p0s, op, active, sliding)
        evbuf.time[ne], evbuf.sample[ne], evbuf.unit[ne], evbuf.active[ne] = t_new, s, u, active[u]
        ne += 1
        t = t_new
        if ne - ev0 >= max_events:
            return OK, ns - seg0, ne - ev0, t, False


@njit(cache=True, nogil=True)
def exact_run(hi, S, E, P0, op, alpha, t_max, tol, max_events, kmax, segbuf, evbuf, results, counters):
    """Integrate samples ``counters[C_NEXT] <= s < hi`` (rows ``s`` of ``S``, ``E``, ``P0``) one after the other.

    Records go to ``segbuf`` / ``evbuf`` from ``counters[C_NSEG]`` / ``counters[C_NEV]``.  When
    a buffer is full the sample's records are dropped and the run stops with
    ``counters[C_STATUS] = FULL`` (the caller grows the buffers and calls again: it resumes at
    that sample).  A sample whose Lanczos does not reach its grade within ``kmax`` is marked in
    ``results.fallback`` (no records) and skipped.

    Parameters
    ----------
    hi : int
        End of the block.
    S, E, P0 : ndarray, shape (n_samples, ...)
        Start states (pins set), constant edge terms, constants of ``p``, one row per sample.
    op : ExactOperator
    alpha, t_max, tol : float
    max_events, kmax : int
        See :func:`integrate_sample`.
    segbuf : SegmentRecords
    evbuf : EventRecords
    results : SampleResults
        Written at the rows of the samples integrated.
    counters : ndarray of int64, shape (N_COUNTERS,)
        ``C_NEXT`` (next sample), ``C_NSEG``, ``C_NEV`` (records used), ``C_STATUS``.
    """
    n = S.shape[1]
    V = np.empty((min(kmax, n) + 1, n))
    ws = scan_workspace(2 * op.z_index.size)
    for s in range(counters[C_NEXT], hi):
        seg0, ev0 = counters[C_NSEG], counters[C_NEV]
        status, ns, ne, t, conv = integrate_sample(s, S[s], E[s], P0[s], op, alpha, t_max, tol, max_events, kmax,
                                                   V, ws, segbuf, evbuf, seg0, ev0, results.final[s],
                                                   results.star[s])
        if status == FULL:
            counters[C_STATUS] = FULL
            return
        results.fallback[s] = status == CAP
        if status == OK:
            counters[C_NSEG] = seg0 + ns
            counters[C_NEV] = ev0 + ne
            results.time[s], results.converged[s] = t, conv
        counters[C_NEXT] = s + 1
    counters[C_STATUS] = OK


@njit(cache=True, nogil=True)
def scan_workspace(n_watch):
    """:class:`ScanWorkspace` of :func:`first_event` for up to ``n_watch`` watched rows (``MAX_DEPTH`` levels)."""
    nw = max(n_watch, 1)
    return ScanWorkspace(np.empty((MAX_DEPTH, K + 1)), np.zeros(MAX_DEPTH, np.int64), np.zeros(MAX_DEPTH, np.int64),
                         np.empty((MAX_DEPTH, nw, K + 1)), np.empty((MAX_DEPTH, nw, K + 1)),
                         np.empty((MAX_DEPTH, nw, K + 1)), np.empty((MAX_DEPTH, nw, K + 1)))


@njit(cache=True, nogil=True)
def segment_representation(omega, e_s, alpha, active, sliding, op, kmax):
    """``(status, star, Yt, mu, gamma, bound)`` of a segment starting at ``omega`` (as in :func:`integrate_sample`).

    Parameters
    ----------
    omega, e_s : ndarray
        Start state and the sample's constant edge term.
    alpha : float
    active, sliding : ndarray of bool, shape (n_units,)
    op : ExactOperator
    kmax : int
    """
    n = omega.size
    V = np.empty((min(kmax, n) + 1, n))
    star = np.empty(n)
    status, Yt, mu, gamma, bound = segment_setup(omega, e_s, alpha, active, sliding, op, kmax, V, star)
    return status, star, Yt, mu, gamma, bound
