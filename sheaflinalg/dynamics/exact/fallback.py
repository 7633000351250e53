"""The Python path of the exact flow: samples the compiled engine hands back, segment by segment.

With identity output the restricted heat equation is piecewise affine: in an
activation region ``d omega/dt = -alpha (L_m omega + c_m)`` (see :mod:`.affine`),
solved in closed form per segment, by the region's dense eigendecomposition
(:mod:`.dense`, up to ``DENSE_MAX_N`` coordinates) or by ``expm_multiply``
(:mod:`.expm`).  A segment ends at the first event:

* a pre-activation ``z_j`` reaches 0: it crosses (the pattern flips), or, when
  both sides push into the surface (``p_j > 0`` below and ``p_j + a_j < 0``
  above, ``p_j = (W a_prev + b)_j``), Filippov sliding starts: ``z_j`` is held
  at 0 while everything else follows the common field;
* while sliding, ``p_j`` or ``p_j + a_j`` changes sign: sliding ends and
  ``z_j`` leaves below (inactive) or above (active).

The initial region and the classification of events are the compiled engine's
(:func:`sheaflinalg.kernels.exact.regions.initial_region`, :func:`~sheaflinalg.kernels.exact.regions.classify`),
so every path applies the same rules; units sliding from the start open their
episodes at ``t = 0``.  A sample stops at ``t_max``, at its ``max_events``-th
event, or when its state is within ``tol`` of its region's fixed point and that
fixed point is consistent with the region (then it is the equilibrium).
"""

import numpy as np

from ...kernels.exact.regions import classify, initial_region
from ...kernels.exact.structs import SLIDING_START
from .dense import Segment
from .expm import ExpmSegment
from .regions import SparseRegion


def open_segment(field, cache, s, t, key, region, omega, alpha):
    """The segment of sample ``s`` starting at time ``t`` from ``omega`` in ``region``."""
    star = region.fixed_point(omega, field.e[s])
    r0 = omega[region.free] - star[region.free]
    if isinstance(region, SparseRegion):
        return ExpmSegment(s, t, key, region, star, r0, alpha, cache)
    return Segment(s, t, key, region, star, region.Q.T @ r0, alpha, cache)


def _start(field, op, s, omega):
    """Initial region of sample ``s`` at ``omega`` and the events at ``t = 0`` (units sliding from the start)."""
    active = np.zeros(field.z_index.size, dtype=np.bool_)
    sliding = np.zeros(field.z_index.size, dtype=np.bool_)
    initial_region(omega, field.p0[s], op, active, sliding)
    events = [(0.0, s, int(u), SLIDING_START, False) for u in np.flatnonzero(sliding)]
    return active, sliding, events


def follow_sample(field, op, cache, s, omega0, alpha, t_max, tol, max_events):
    """Integrate sample ``s`` from ``omega0`` (full free vector, pins set) on the Python path.

    ``op``: the field's :class:`~sheaflinalg.kernels.exact.structs.ExactOperator` (hard pins included).
    Returns ``(segments, events, converged, time)`` with events as tuples
    ``(time, sample, unit, kind, active_after)``.
    """
    omega = np.array(omega0, dtype=np.float64)
    active, sliding, events = _start(field, op, s, omega)
    p0s = np.ascontiguousarray(field.p0[s])
    t, segments = 0.0, []
    while True:
        key, region = cache.get(active, sliding)
        seg = open_segment(field, cache, s, t, key, region, omega, alpha)
        segments.append(seg)
        if len(events) >= max_events:        # only at t = 0: the events of the initial sliding set
            return segments, events, False, t
        f = seg.sums(region, region.A_sparse @ seg.star + region.constants(field.p0[s]))
        consistent = bool(np.all(f.c >= -f.roundoff))
        t_conv = seg.convergence_time(region, tol, t_max - t) if consistent else np.inf
        found = f.first_event(min(t_max - t, t_conv), seg.first_step(region)) if f.c.size else None
        if found is None:
            seg.end = t + min(t_max - t, t_conv)
            return segments, events, consistent and t_conv <= t_max - t, seg.end
        dt_event, row = found
        t = seg.end = t + dt_event
        omega = np.ascontiguousarray(seg.state(region, [t])[0])
        u = int(region.unit[row])
        kind = classify(u, int(region.kind[row]), omega, p0s, op, active, sliding)
        events.append((t, s, u, int(kind), bool(active[u])))
        if len(events) >= max_events:
            return segments, events, False, t
