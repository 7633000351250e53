"""``heat(..., method="exact")``: the exact flow of a batch (see :mod:`sheaflinalg.dynamics.exact`).

Every sample is integrated by the compiled Krylov engine (:mod:`.krylov`); a
sample whose segments need more Krylov vectors than the engine's cap goes to
the Python path (:func:`.fallback.follow_sample`).  Then, per distinct
final region, ``lambda_1(L_FF)`` (the certificate's decay rate) and the edge
discrepancy.
"""

import warnings

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..._common.memory import check_memory
from ..._common.threads import blas_limit
from ...kernels.exact.scan import K, MAX_DEPTH
from . import krylov as _krylov
from .affine import AffineField
from .fallback import follow_sample
from .krylov import KrylovEngine, SegmentList
from .regions import RegionCache
from .result import EVENT_DTYPE, EVENT_KINDS, ExactHeatResult

DENSE_EIGEN_MAX = 600     # lambda_1 of larger final regions by shift-invert Lanczos (ARPACK) at sigma = 0


def memory_estimate(dims, n_samples, threads):
    """Bytes the exact flow of a network of widths ``dims`` needs for ``n_samples`` samples, at least.

    The sparse operator (one assembly, ``D0``, ``D0^T`` and ``P`` with the engine's copies: about
    ten arrays of 16 bytes per stored weight), the work of every block running at once (Lanczos
    vectors and directions, the watched sums of a segment, the event scan's levels) and the
    per-sample buffers (segment records, final states and fixed points).
    """
    dims = [int(d) for d in dims]
    units = sum(dims[1:-1])
    n = 2 * units + dims[-1]
    nnz = n + units + sum(a * b for a, b in zip(dims[1:-1], dims[2:]))
    k = min(_krylov.KRYLOV_CAP, n)
    per_block = 8 * (2 * (k + 1) * n + 4 * k * 2 * units + 4 * MAX_DEPTH * 2 * units * (K + 1))
    running = min(threads, len(_krylov.block_bounds(n_samples)))
    buffers = 8 * n_samples * (_krylov.RECORDS_PER_SAMPLE * (n + units) + 2 * n)
    return 10 * 16 * nnz + running * per_block + buffers


def check_exact_memory(net, n_samples, threads):
    """Refuse (:class:`~sheaflinalg.InsufficientMemoryError`) an exact flow that would not fit in memory."""
    check_memory(memory_estimate(net.dims, n_samples, threads),
                 f"the exact flow of {list(net.dims)} for {n_samples} sample(s) with {threads} thread(s)",
                 "use fewer samples or threads, a smaller network, or method='euler'")


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


def _episodes(ev):
    """Sliding episodes ``(sample, layer, neuron, start event, end event or -1)`` of the events, shape (n, 5)."""
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
    rows = np.stack([ev["sample"][starts], ev["layer"][starts], ev["neuron"][starts], starts, ends[starts]], axis=1)
    return rows.astype(np.int64).reshape(-1, 5)


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


def run_exact(problem, settings, krylov_cap=None):
    """Integrate every sample of ``problem`` (:class:`~sheaflinalg.dynamics.problem.HeatProblem`) exactly,
    with ``settings`` (:class:`~.settings.ExactSettings`); see :func:`sheaflinalg.heat`.

    ``krylov_cap``: Lanczos vectors per segment before a sample goes to the Python path
    (default :data:`~sheaflinalg.dynamics.exact.krylov.KRYLOV_CAP`).
    """
    net, X, S, lay, hard = problem.net, problem.X, problem.S0, problem.layout, problem.hard
    alpha, tol, threads = problem.settings.alpha, problem.settings.tol, problem.settings.threads
    t_max, max_events = settings.t_max, settings.max_events
    field = AffineField(net, X, lay.reduced, problem.soft, problem.lam)
    engine = KrylovEngine(field, hard.index, alpha, krylov_cap)
    cache = RegionCache(field, hard.index)
    others, py_events = {}, []
    with blas_limit(1):             # threaded BLAS only slows the small eigensolves down
        run = engine.run(S.T, t_max, tol, max_events, threads, problem.settings.progress)
        for s in np.flatnonzero(run.fallback):
            segs, evs, run.converged[s], run.time[s] = follow_sample(
                field, engine.op, cache, int(s), S[:, s].copy(), alpha, t_max, tol, max_events)
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
    kinds = ev["kind"]
    switches = np.bincount(ev["sample"][(kinds == "crossing_up") | (kinds == "crossing_down")], minlength=M)
    episodes = np.bincount(ev["sample"][kinds == "sliding_start"], minlength=M)
    disc = 0.5 * np.sum(E * E, axis=1)
    final, time = run.final, run.time
    out = final[:, lay.free(lay.output_block)]
    bounds = segments.krylov_bounds()
    return ExactHeatResult(
        state=final, output=np.ascontiguousarray(out), converged=bool(run.converged.all()),
        final_distance=float(np.max(dist * np.exp(-rate * (time - t_last)))) if M else 0.0,
        discord=disc, edge_discrepancy=E[:, :lay.n_edges], episodes=_episodes(ev), layout=lay,
        pinned=list(hard.labels), alpha=alpha, time=time, events=ev, segments=segments,
        final_pattern=_per_layer(field, active, net.dims), final_sliding=_per_layer(field, sliding, net.dims),
        switches=switches, sliding_episodes=episodes, fixed_point=run.star, converged_samples=run.converged,
        decay_rate=rate, t_last=t_last, distance_last=dist, cache_hits=hits, cache_misses=misses, cache=cache,
        krylov_bound=float(bounds.max()) if bounds.size else 0.0, fallback_samples=np.flatnonzero(run.fallback),
        stopped_at_max_events=warn_max_events(ev["sample"], run.converged, max_events))
