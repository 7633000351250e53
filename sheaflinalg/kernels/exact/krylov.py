"""A segment of the exact flow in its Krylov space: the operator's products, Lanczos, the segment's set-up
(fixed point, directions, rates, a-posteriori Krylov error) and its state at a time."""

import numpy as np
from numba import njit

from .structs import CAP, OK

KRYLOV_TOL = 1e-12     # Lanczos breakdown: beta_k <= KRYLOV_TOL * ||T|| (Gershgorin estimate)


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


@njit(cache=True, nogil=True)
def segment_representation(omega, e_s, alpha, active, sliding, op, kmax):
    """``(status, star, Yt, mu, gamma, bound)`` of a segment starting at ``omega`` (as in
    :func:`~.driver.integrate_sample`).

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
