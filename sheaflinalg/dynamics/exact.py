"""The exact continuous-time heat flow: event-driven integration between ReLU switches.

With identity output the restricted heat equation is piecewise affine: in an
activation region ``d omega/dt = -alpha (L_m omega + c_m)`` (see
:mod:`sheaflinalg.dynamics.affine`), solved in closed form,
``omega(t) = omega*_m + Q exp(-alpha Lambda t) Q^T (omega_0 - omega*_m)``, with
``L_m = Q Lambda Q^T`` cached by region (:mod:`sheaflinalg.dynamics.regions`).
A segment ends at the first event (:mod:`sheaflinalg.dynamics.events`):

* a pre-activation ``z_j`` reaches 0: it crosses (the pattern flips), or, when
  both sides push into the surface (``p_j > 0`` below and ``p_j + a_j < 0``
  above, ``p_j = (W a_prev + b)_j``), Filippov sliding starts: ``z_j`` is held
  at 0 while everything else follows the common field;
* while sliding, ``p_j`` or ``p_j + a_j`` changes sign: sliding ends and
  ``z_j`` leaves below (inactive) or above (active).

A sample stops at ``t_max`` or when its state is within ``tol`` of its
region's fixed point and that fixed point is consistent with the region
(then it is the equilibrium).
"""

import numpy as np
from scipy.optimize import brentq

from .events import ExponentialSums, first_event
from .regions import WATCH_P, WATCH_Q, WATCH_Z

CROSSING_UP, CROSSING_DOWN, SLIDING_START, SLIDING_END = 0, 1, 2, 3
EVENT_KINDS = ("crossing_up", "crossing_down", "sliding_start", "sliding_end")


class Segment:
    """One piece of a sample's trajectory: ``[start, end]`` in one region.

    ``omega(t) = star + Q (exp(-alpha lam (t - start)) * beta)`` on the region's free coordinates.
    """

    __slots__ = ("sample", "start", "end", "key", "active", "sliding", "star", "beta", "alpha")

    def __init__(self, sample, start, key, region, star, beta, alpha):
        self.sample, self.start, self.end, self.key = sample, start, start, key
        self.active, self.sliding = region.active, region.sliding
        self.star, self.beta, self.alpha = star, beta, alpha

    def __repr__(self):
        return (f"Segment(sample={self.sample}, start={self.start:.6g}, end={self.end:.6g}, "
                f"active={int(self.active.sum())}, sliding={int(self.sliding.sum())})")

    def state(self, region, t):
        """States at times ``t`` (1-D array), shape (n_t, n)."""
        E = np.exp(-self.alpha * np.outer(np.asarray(t) - self.start, region.lam))
        out = np.repeat(self.star[None, :], E.shape[0], axis=0)
        out[:, region.free] += (E * self.beta) @ region.Q.T
        return out


def convergence_time(beta, mu, tol):
    """Smallest ``t`` with ``||sum_k beta_k e^{-mu_k t} q_k|| <= tol`` (``Q`` orthonormal)."""
    norm = float(np.linalg.norm(beta))
    if norm <= tol:
        return 0.0
    if tol <= 0:
        return np.inf
    upper = np.log(norm / tol) / mu.min()

    def gap(t):
        return 0.5 * np.log(np.sum(beta ** 2 * np.exp(-2 * mu * t))) - np.log(tol)
    return brentq(gap, 0.0, upper, xtol=1e-300, rtol=4 * np.finfo(float).eps) if gap(upper) < 0 else upper


def _classify(field, region, row, omega, s, active, sliding):
    """Apply the event of watched ``row`` at state ``omega`` (changed in place); returns (kind, unit)."""
    u = int(region.unit[row])
    kind = region.kind[row]
    p = float(field.P_dense[u] @ omega + field.p0[s, u])
    q = p + float(omega[field.a_index[u]])
    omega[field.z_index[u]] = 0.0
    if kind == WATCH_Z:
        if (active[u] and p > 0) or (not active[u] and q < 0):
            sliding[u], active[u] = True, False
            return SLIDING_START, u
        active[u] = not active[u]
        return (CROSSING_UP if active[u] else CROSSING_DOWN), u
    sliding[u] = False
    active[u] = kind == WATCH_Q
    return SLIDING_END, u


def integrate_sample(field, cache, s, omega0, pins, alpha, t_max, tol, max_events):
    """Integrate sample ``s`` from ``omega0`` (full free vector, pins set).

    ``pins`` are the hard-pinned positions.  Returns ``(segments, events, converged, time)``
    with events as tuples ``(time, sample, unit, kind, active_after)``.
    """
    omega = omega0.copy()
    z = omega[field.z_index]
    held_units = np.isin(field.z_index, pins)
    active = z >= 0
    p = field.P_dense @ omega + field.p0[s]
    sliding = (z == 0) & (p > 0) & (p + omega[field.a_index] < 0) & ~held_units
    active[sliding] = False
    t, segments, events = 0.0, [], []
    while True:
        key, region = cache.get(active, sliding)
        star = region.fixed_point(omega, field.e[s])
        beta = region.Q.T @ (omega[region.free] - star[region.free])
        seg = Segment(s, t, key, region, star, beta, alpha)
        segments.append(seg)
        mu = alpha * region.lam
        f = ExponentialSums(region.A @ star + region.constants(field.p0[s]), region.AQ * beta, mu)
        consistent = bool(np.all(f.c >= -f.roundoff))
        t_conv = convergence_time(beta, mu, tol) if consistent else np.inf
        h0 = 0.25 / mu.max() if mu.size else 1.0
        found = first_event(f, min(t_max - t, t_conv), h0) if f.c.size else None
        if found is None:
            seg.end = t + min(t_max - t, t_conv)
            return segments, events, consistent and t_conv <= t_max - t, seg.end
        dt_event, row = found
        t = seg.end = t + dt_event
        omega = seg.state(region, [t])[0]
        kind, u = _classify(field, region, row, omega, s, active, sliding)
        events.append((t, s, u, kind, bool(active[u])))
        if len(events) >= max_events:
            return segments, events, False, t
