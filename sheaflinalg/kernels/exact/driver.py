"""The exact engine's driver: one sample integrated segment by segment, event by event, and a block of
samples written into growable record buffers."""

import numpy as np
from numba import njit

from .krylov import segment_setup, state_at
from .regions import classify, initial_region, watched_rows
from .scan import convergence_time, first_event, scan_workspace
from .structs import C_NEV, C_NEXT, C_NSEG, C_STATUS, CAP, FULL, OK, SLIDING_START


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
        Lanczos workspace; ``ws`` the scan's (:class:`~.structs.ScanWorkspace`).
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
