"""Regions of the exact flow: the watched quantities of a segment (with their round-off), the initial
region and the Filippov classification of an event."""

import numpy as np
from numba import njit

from .structs import CROSSING_DOWN, CROSSING_UP, EPS, SLIDING_END, SLIDING_START, WATCH_P, WATCH_Q, WATCH_Z


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
        The segment's representation (:func:`~.krylov.segment_setup`).
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
