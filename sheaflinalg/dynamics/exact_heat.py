"""``heat(..., method="exact")``: the exact flow of a batch, sample by sample (see :mod:`.exact`)."""

import numpy as np

from .._common.threads import blas_limit
from .affine import AffineField
from .exact import EVENT_KINDS, integrate_sample
from .exact_result import EVENT_DTYPE, ExactHeatResult
from .regions import RegionCache


def check_affine(net, reduced):
    """Refuse a flow that is not piecewise affine (a nonlinear output), naming ``method``."""
    if net.output != "identity":
        raise ValueError(
            f"method='exact' needs a piecewise-affine flow, i.e. identity output; this network's output is "
            f"{net.output!r}, whose output edge is nonlinear (not piecewise affine). Use method='euler' "
            "for sigmoid, tanh and softmax outputs")


def _event_table(field, events):
    rows = [(t, s, field.layer[u], field.neuron[u], EVENT_KINDS[k], a) for t, s, u, k, a in events]
    ev = np.array(rows, dtype=EVENT_DTYPE) if rows else np.zeros(0, dtype=EVENT_DTYPE)
    return ev[np.lexsort((ev["sample"], ev["time"]))]


def _per_layer(field, masks, dims):
    out = []
    for l in range(1, len(dims) - 1):
        out.append(np.ascontiguousarray(masks[:, field.layer == l]))
    return out


def _crossings_and_sliding(ev):
    """Euler-compatible ``crossings`` (n, 5) and ``sliding`` (n, 6) tables of the events."""
    idx = np.arange(len(ev))
    up = (ev["kind"] == "crossing_up") | (ev["kind"] == "crossing_down")
    cross = np.stack([idx[up], ev["sample"][up], ev["layer"][up], ev["neuron"][up],
                      ev["active"][up].astype(np.int64)], axis=1) if up.any() else np.zeros((0, 5), np.int64)
    starts = np.flatnonzero(ev["kind"] == "sliding_start")
    rows = []
    for i in starts:
        same = (idx > i) & (ev["kind"] == "sliding_end") & (ev["sample"] == ev["sample"][i]) \
            & (ev["layer"] == ev["layer"][i]) & (ev["neuron"] == ev["neuron"][i])
        end = int(np.flatnonzero(same)[0]) if same.any() else -1
        rows.append((ev["sample"][i], ev["layer"][i], ev["neuron"][i], i, end, 0))
    return cross.astype(np.int64), np.array(rows, dtype=np.int64).reshape(-1, 6)


def heat_exact(net, X, S, lay, hard, soft, lam, alpha, tol, t_max, max_events):
    """Integrate every sample from ``S`` (columns layout, pins set) exactly; see :func:`sheaflinalg.heat`."""
    M = X.shape[0]
    field = AffineField(net, X, lay.reduced, soft, lam)
    cache = RegionCache(field, hard.index)
    segments, events = [], []
    time, conv = np.zeros(M), np.zeros(M, dtype=bool)
    final = np.zeros((M, lay.n_free))
    with blas_limit(1):             # threaded BLAS only slows the small eigensolves down
        for s in range(M):
            segs, evs, conv[s], time[s] = integrate_sample(field, cache, s, S[:, s].copy(), hard.index,
                                                           alpha, t_max, tol, max_events)
            segments += segs
            events += evs
            last = segs[-1]
            final[s] = last.state(cache.by_key(last.key, last.active, last.sliding), [time[s]])[0]
    return _result(net, field, cache, segments, events, time, conv, final, lay, hard, alpha)


def _final_region_stats(field, cache, segments, M, alpha):
    rate, dist, t_last = np.zeros(M), np.zeros(M), np.zeros(M)
    active = np.zeros((M, field.z_index.size), dtype=bool)
    sliding = np.zeros_like(active)
    star = np.zeros((M, field.n))
    for sg in segments:              # the last segment of a sample comes last
        region = cache.by_key(sg.key, sg.active, sg.sliding)
        s = sg.sample
        rate[s] = alpha * region.lam[0] if region.lam.size else np.inf
        dist[s], t_last[s] = np.linalg.norm(sg.beta), sg.start
        active[s], sliding[s], star[s] = sg.active | sg.sliding, sg.sliding, sg.star
    return rate, dist, t_last, active, sliding, star


def _result(net, field, cache, segments, events, time, conv, final, lay, hard, alpha):
    M = time.size
    ev = _event_table(field, events)
    rate, dist, t_last, active, sliding, star = _final_region_stats(field, cache, segments, M, alpha)
    cross, slide = _crossings_and_sliding(ev)
    kinds = ev["kind"]
    switches = np.bincount(ev["sample"][(kinds == "crossing_up") | (kinds == "crossing_down")], minlength=M)
    episodes = np.bincount(ev["sample"][kinds == "sliding_start"], minlength=M)
    E = np.zeros((M, field.D0.shape[0]))
    for sg in segments:              # the last segment of a sample comes last
        E[sg.sample] = cache.by_key(sg.key, sg.active, sg.sliding).D @ final[sg.sample] + field.e[sg.sample]
    disc = 0.5 * np.sum(E * E, axis=1)
    out = final[:, lay.free(lay.output_block)]
    return ExactHeatResult(
        state=final, output=np.ascontiguousarray(out), steps=len(segments), converged=bool(conv.all()),
        final_change=float(np.max(dist * np.exp(-rate * (time - t_last)))) if M else 0.0,
        discord=disc, edge_discrepancy=E[:, :lay.n_edges], history=None, crossings=cross,
        crossings_total=len(cross), sliding=slide, layout=lay, sliding_total=len(slide),
        pinned=list(hard.labels), alpha=alpha, time=time, events=ev, segments=segments,
        final_pattern=_per_layer(field, active, net.dims), final_sliding=_per_layer(field, sliding, net.dims),
        switches=switches, sliding_episodes=episodes, fixed_point=star, converged_samples=conv,
        decay_rate=rate, t_last=t_last, distance_last=dist, cache_hits=cache.hits,
        cache_misses=cache.misses, cache=cache)

