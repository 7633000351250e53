"""``heat(..., method="exact")``: the exact flow of a batch (see :mod:`.exact`).

Every sample is integrated by the compiled Krylov engine (:mod:`.exact_krylov`); a
sample whose segments need more Krylov vectors than the engine's cap goes to
the dense Python path (:func:`.exact.integrate_sample`).  Then, per distinct
final region, ``lambda_1(L_FF)`` (the certificate's decay rate) and the edge
discrepancy.
"""

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from .._common.threads import blas_limit
from .affine import AffineField
from .exact import EVENT_KINDS, integrate_sample, warn_max_events
from .exact_krylov import KrylovEngine, SegmentList
from .exact_result import EVENT_DTYPE, ExactHeatResult
from .regions import RegionCache

DENSE_EIGEN_MAX = 600     # lambda_1 of larger final regions by shift-invert Lanczos (ARPACK) at sigma = 0


def check_affine(net, reduced):
    """Refuse a flow that is not piecewise affine (a nonlinear output), naming ``method``."""
    if net.output != "identity":
        raise ValueError(
            f"method='exact' needs a piecewise-affine flow, i.e. identity output; this network's output is "
            f"{net.output!r}, whose output edge is nonlinear (not piecewise affine). Use method='euler' "
            "for sigmoid, tanh and softmax outputs")


def _event_table(field, events, run):
    """Events of the engine (``run``) and of the Python path (tuples) as one table sorted by time, then sample."""
    t, s, u, k, a = (np.array(col) for col in zip(*events)) if events else [np.zeros(0)] * 5
    ev = np.zeros(run.ev_time.size + len(events), dtype=EVENT_DTYPE)
    unit = np.concatenate([run.ev_unit, u.astype(np.int64)])
    ev["time"] = np.concatenate([run.ev_time, t])
    ev["sample"] = np.concatenate([run.ev_sample, s.astype(np.int64)])
    ev["layer"], ev["neuron"] = field.layer[unit], field.neuron[unit]
    ev["kind"] = np.array(EVENT_KINDS)[np.concatenate([run.ev_kind, k.astype(np.int64)])]
    ev["active"] = np.concatenate([run.ev_active, a.astype(bool)])
    return ev[np.lexsort((ev["sample"], ev["time"]))]


def _per_layer(field, masks, dims):
    return [np.ascontiguousarray(masks[:, field.layer == l]) for l in range(1, len(dims) - 1)]


def _crossings_and_sliding(ev):
    """Euler-compatible ``crossings`` (n, 5) and ``sliding`` (n, 6) tables of the events."""
    idx = np.arange(len(ev))
    up = (ev["kind"] == "crossing_up") | (ev["kind"] == "crossing_down")
    cross = np.stack([idx[up], ev["sample"][up], ev["layer"][up], ev["neuron"][up],
                      ev["active"][up].astype(np.int64)], axis=1) if up.any() else np.zeros((0, 5), np.int64)
    # A unit's sliding episodes do not overlap: the next start-or-end event of the same unit and
    # sample after a start is its end (or there is none: -1).
    ends = np.full(len(ev), -1, dtype=np.int64)
    edge = np.flatnonzero((ev["kind"] == "sliding_start") | (ev["kind"] == "sliding_end"))
    order = edge[np.lexsort((edge, ev["neuron"][edge], ev["layer"][edge], ev["sample"][edge]))]
    unit = np.stack([ev["sample"][order], ev["layer"][order], ev["neuron"][order]], axis=1)
    paired = (unit[:-1] == unit[1:]).all(axis=1) & (ev["kind"][order[:-1]] == "sliding_start") \
        & (ev["kind"][order[1:]] == "sliding_end")
    ends[order[:-1][paired]] = order[1:][paired]
    starts = np.flatnonzero(ev["kind"] == "sliding_start")
    rows = np.stack([ev["sample"][starts], ev["layer"][starts], ev["neuron"][starts], starts, ends[starts],
                     np.zeros_like(starts)], axis=1)
    return cross.astype(np.int64), rows.astype(np.int64).reshape(-1, 6)


def _held(field, pins, sliding):
    held = np.zeros(field.n, dtype=bool)
    held[pins] = True
    held[field.z_index[sliding]] = True
    return held


def _fixed_point(field, pins, active, sliding, omega, e):
    """Fixed point of the region (``omega`` gives the held values): ``L_FF star_F = -D_F^T (D_P omega_P + e)``."""
    held = _held(field, pins, sliding)
    D = field.coboundary(active)
    DF, DP = D[:, ~held], D[:, held]
    star = omega.copy()
    if DF.shape[1]:
        star[~held] = -spla.spsolve(sp.csc_matrix(DF.T @ DF), DF.T @ (DP @ omega[held] + e))
    return star


def _smallest_eigenvalue(D, held):
    """``lambda_1(L_FF)`` of a region, ``D`` its coboundary (dense up to :data:`DENSE_EIGEN_MAX` free coordinates)."""
    DF = D[:, ~held]
    if DF.shape[1] == 0:
        return np.inf
    L = (DF.T @ DF).tocsc()
    if L.shape[0] <= DENSE_EIGEN_MAX:
        return float(np.linalg.eigvalsh(L.toarray())[0])
    return float(spla.eigsh(L, k=1, sigma=0.0, which="LM", v0=np.ones(L.shape[0]), tol=0.0,
                            return_eigenvectors=False)[0])


def _region_keys(active, sliding):
    """One row of bytes per segment naming its region; and the number of distinct regions."""
    keys = np.concatenate([np.packbits(active, axis=1), np.packbits(sliding, axis=1)], axis=1)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def heat_exact(net, X, S, lay, hard, soft, lam, alpha, tol, t_max, max_events, threads=1, krylov_cap=None):
    """Integrate every sample from ``S`` (columns layout, pins set) exactly; see :func:`sheaflinalg.heat`.

    ``krylov_cap``: Lanczos vectors per segment before a sample goes to the dense Python path
    (default :data:`~sheaflinalg.dynamics.exact_krylov.KRYLOV_CAP`).
    """
    M = X.shape[0]
    field = AffineField(net, X, lay.reduced, soft, lam)
    engine = KrylovEngine(field, hard.index, alpha, krylov_cap)
    cache = RegionCache(field, hard.index)
    others, py_events = {}, []
    with blas_limit(1):             # threaded BLAS only slows the small eigensolves down
        run = engine.run(S.T, t_max, tol, max_events, threads)
        for s in np.flatnonzero(run.fallback):
            segs, evs, run.converged[s], run.time[s] = integrate_sample(
                field, cache, int(s), S[:, s].copy(), hard.index, alpha, t_max, tol, max_events)
            others[int(s)] = segs
            py_events += evs
            last = others[int(s)][-1]
            run.final[s] = last.states(np.array([run.time[s]]))[0]
            run.star[s] = _fixed_point(field, hard.index, last.active, last.sliding, last.states(
                np.array([last.start]))[0], field.e[s])
        segments = SegmentList(engine, run, others)
        return _result(net, field, engine, cache, segments, _event_table(field, py_events, run), run, lay, hard,
                       alpha, max_events)


def _final_region_stats(field, segments, run, pins, alpha):
    """Per sample: decay rate ``alpha lambda_1`` of the final region, ``||omega(t_last) - omega*||``,
    ``t_last``, final masks and ``D omega + e``; and the (hits, misses) of the region statistics."""
    M = run.time.size
    n_seg = len(segments)
    last = np.searchsorted(segments.samples, np.arange(M), side="right") - 1      # sample-major
    first, inverse = _region_keys(segments.active, segments.sliding) if n_seg else (np.zeros(0, int),) * 2
    rate, edges = np.zeros(M), np.zeros((M, field.D0.shape[0]))
    for r in np.unique(inverse[last]) if M else []:
        i = first[r]
        act, sli = segments.active[i], segments.sliding[i]
        mine = np.flatnonzero(inverse[last] == r)
        D = field.coboundary(act)
        rate[mine] = alpha * _smallest_eigenvalue(D, _held(field, pins, sli))
        edges[mine] = (D @ run.final[mine].T).T + field.e[mine]
    dist = np.array([np.linalg.norm(segments.start_state(i) - run.star[s]) for s, i in enumerate(last)])
    active = segments.active[last] | segments.sliding[last]
    return rate, dist, segments.starts[last], active, segments.sliding[last], edges, \
        (n_seg - first.size, first.size)


def _result(net, field, engine, cache, segments, ev, run, lay, hard, alpha, max_events):
    M = run.time.size
    rate, dist, t_last, active, sliding, E, (hits, misses) = _final_region_stats(field, segments, run, hard.index,
                                                                                alpha)
    cross, slide = _crossings_and_sliding(ev)
    kinds = ev["kind"]
    switches = np.bincount(ev["sample"][(kinds == "crossing_up") | (kinds == "crossing_down")], minlength=M)
    episodes = np.bincount(ev["sample"][kinds == "sliding_start"], minlength=M)
    disc = 0.5 * np.sum(E * E, axis=1)
    final, time = run.final, run.time
    out = final[:, lay.free(lay.output_block)]
    bounds = segments.krylov_bounds()
    return ExactHeatResult(
        state=final, output=np.ascontiguousarray(out), steps=len(segments), converged=bool(run.converged.all()),
        final_change=float(np.max(dist * np.exp(-rate * (time - t_last)))) if M else 0.0,
        discord=disc, edge_discrepancy=E[:, :lay.n_edges], history=None, crossings=cross,
        crossings_total=len(cross), sliding=slide, layout=lay, sliding_total=len(slide),
        pinned=list(hard.labels), alpha=alpha, time=time, events=ev, segments=segments,
        final_pattern=_per_layer(field, active, net.dims), final_sliding=_per_layer(field, sliding, net.dims),
        switches=switches, sliding_episodes=episodes, fixed_point=run.star, converged_samples=run.converged,
        decay_rate=rate, t_last=t_last, distance_last=dist, cache_hits=hits, cache_misses=misses, cache=cache,
        krylov_bound=float(bounds.max()) if bounds.size else 0.0, fallback_samples=np.flatnonzero(run.fallback),
        stopped_at_max_events=warn_max_events(ev["sample"], run.converged, max_events))
