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

import warnings

import numpy as np
from scipy.optimize import brentq

from .events import ExponentialSums, first_event
from .expm_flow import ExpmSums, Flow
from .expm_flow import convergence_time as expm_convergence_time
from .regions import WATCH_P, WATCH_Q, WATCH_Z, SparseRegion

CROSSING_UP, CROSSING_DOWN, SLIDING_START, SLIDING_END = 0, 1, 2, 3
EVENT_KINDS = ("crossing_up", "crossing_down", "sliding_start", "sliding_end")


class _SegmentBase:
    """One piece of a sample's trajectory: ``[start, end]`` in one region (``key`` in ``cache``)."""

    __slots__ = ("sample", "start", "end", "key", "active", "sliding", "star", "beta", "alpha", "cache")

    def __init__(self, sample, start, key, region, star, beta, alpha, cache=None):
        self.sample, self.start, self.end, self.key = sample, start, start, key
        self.active, self.sliding = region.active, region.sliding
        self.star, self.beta, self.alpha, self.cache = star, beta, alpha, cache

    def __repr__(self):
        return (f"{type(self).__name__}(sample={self.sample}, start={self.start:.6g}, end={self.end:.6g}, "
                f"active={int(self.active.sum())}, sliding={int(self.sliding.sum())})")

    def states(self, t):
        """Full states at times ``t`` (1-D array), shape (n_t, n); the region is taken from the cache."""
        return self.state(self.cache.by_key(self.key, self.active, self.sliding), t)


class Segment(_SegmentBase):
    """A dense segment: ``omega(t) = star + Q (exp(-alpha lam (t - start)) * beta)`` on the free coordinates."""

    __slots__ = ()

    def state(self, region, t):
        """States at times ``t`` (1-D array), shape (n_t, n)."""
        E = np.exp(-self.alpha * np.outer(np.asarray(t) - self.start, region.lam))
        out = np.repeat(self.star[None, :], E.shape[0], axis=0)
        out[:, region.free] += (E * self.beta) @ region.Q.T
        return out

    def first_step(self, region):
        mu = self.alpha * region.lam
        return 0.25 / mu.max() if mu.size else 1.0

    def convergence_time(self, region, tol, limit):
        return convergence_time(self.beta, self.alpha * region.lam, tol)

    def sums(self, region, c):
        return ExponentialSums(c, region.AQ * self.beta, self.alpha * region.lam)


class ExpmSegment(_SegmentBase):
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
        return expm_convergence_time(Flow(region, self.alpha, self.beta), tol, limit, self.first_step(region))

    def sums(self, region, c):
        return ExpmSums(c, Flow(region, self.alpha, self.beta))


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


def _open_segment(field, cache, s, t, key, region, omega, alpha):
    """The segment of sample ``s`` starting at time ``t`` from ``omega`` in ``region``."""
    star = region.fixed_point(omega, field.e[s])
    r0 = omega[region.free] - star[region.free]
    if isinstance(region, SparseRegion):
        return ExpmSegment(s, t, key, region, star, r0, alpha, cache)
    return Segment(s, t, key, region, star, region.Q.T @ r0, alpha, cache)


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
        seg = _open_segment(field, cache, s, t, key, region, omega, alpha)
        segments.append(seg)
        f = seg.sums(region, region.A_sparse @ seg.star + region.constants(field.p0[s]))
        consistent = bool(np.all(f.c >= -f.roundoff))
        t_conv = seg.convergence_time(region, tol, t_max - t) if consistent else np.inf
        found = first_event(f, min(t_max - t, t_conv), seg.first_step(region)) if f.c.size else None
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


def warn_max_events(event_samples, converged, max_events):
    """Samples stopped by ``max_events`` (a sample stops at its ``max_events``-th event), with a warning.

    ``converged``: bool mask of the samples that converged (one may converge at its last
    allowed event).  Returns a bool mask of shape (n_samples,); a ``RuntimeWarning`` names
    ``max_events`` and how many samples it stopped.
    """
    n_samples = converged.size
    stopped = (np.bincount(np.asarray(event_samples, dtype=np.int64), minlength=n_samples) >= max_events) \
        & ~converged
    if stopped.any():
        warnings.warn(f"max_events={max_events} stopped {int(stopped.sum())} of {n_samples} samples before "
                      "they converged (their trajectories end there); raise max_events to follow them further",
                      RuntimeWarning, stacklevel=5)
    return stopped
