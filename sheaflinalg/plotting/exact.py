"""Figures of the exact heat flow: phase plane with exact crossings and sliding, convergence with
the certificate, and Euler's convergence to the exact flow."""

import numpy as np

from .figure import axes_or_new, finish
from .heat import check_phase_neurons, phase_axes


def _segment_times(sg, end, n=60):
    stop = min(sg.end, end)
    return np.linspace(sg.start, stop, n) if stop > sg.start else np.array([sg.start])


def plot_exact_phase_plane(result, sample=0, layer=1, neurons=(0, 1), ax=None, path=None, t_end=None):
    """Exact trajectory of ``(z_layer[i], z_layer[j])``: crossings at their exact points, sliding along the axes.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> net = sl.Network.random([2, 4, 1], seed=0)
    >>> ex = sl.heat(net, [0.5, -1.0], method="exact", seed=1)
    >>> ax = plot_exact_phase_plane(ex, neurons=(0, 2))
    """
    lay = result.layout
    i, j = check_phase_neurons(lay, layer, neurons)
    s = result.check_sample(sample)
    zi, zj = lay.free(lay.z(layer)).start + i, lay.free(lay.z(layer)).start + j
    end = result.time[s] if t_end is None else float(t_end)
    ax = axes_or_new(ax, figsize=(5, 5))
    units = {i, j}
    for sg in result.segments_of(s):
        if sg.start > end:
            break
        ts = _segment_times(sg, end)
        st = result.sol(ts, sample=s)
        slides = sg.sliding.reshape(-1)
        on_surface = any(slides[_unit(result, layer, u)] for u in units)
        ax.plot(st[zi], st[zj], color="tab:orange" if on_surface else "tab:blue",
                linewidth=2.5 if on_surface else 1.2, zorder=2)
    ev = result.events
    sel = (ev["sample"] == s) & (ev["layer"] == layer) & np.isin(ev["neuron"], [i, j]) & (ev["time"] <= end)
    if sel.any():
        pts = result.sol(ev["time"][sel], sample=s)
        ax.scatter(pts[zi], pts[zj], marker="x", color="red", s=40, zorder=3, label="exact events")
    ax.plot([], [], color="tab:orange", linewidth=2.5, label="sliding (Filippov)")
    final = result.sol(end, sample=s)
    ax.scatter([final[zi]], [final[zj]], marker="*", color="gold", edgecolor="k", s=150, zorder=4, label="final state")
    return phase_axes(ax, lay.z(layer), i, j, path)


def _unit(result, layer, neuron):
    return sum(result.layout.free_block(result.layout.z(l)).size for l in range(1, layer)) + neuron


def plot_exact_convergence(result, sample=0, ax=None, path=None, n=400):
    """``||omega(t) - omega*||`` of the exact flow (log scale), events, and the certificate after the last event.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> net = sl.Network.random([2, 4, 1], seed=0)
    >>> ax = plot_exact_convergence(sl.heat(net, [0.5, -1.0], method="exact", seed=1))
    """
    s = result.check_sample(sample)
    ax = axes_or_new(ax, figsize=(6, 4))
    t = np.linspace(0.0, result.time[s], n)
    dist = np.linalg.norm(result.sol(t, sample=s) - result.fixed_point[s][:, None], axis=0)
    ax.semilogy(t, np.maximum(dist, 1e-300), color="k", label="exact distance to the equilibrium")
    after = t >= result.t_last[s]
    bound = result.distance_last[s] * np.exp(-result.decay_rate[s] * (t[after] - result.t_last[s]))
    ax.semilogy(t[after], bound, color="tab:green", linestyle="--", label=r"certificate $e^{-\alpha\lambda_1 (t - t_{last})}$")
    for k, e in enumerate(result.events[result.events["sample"] == s]):
        ax.axvline(e["time"], color="tab:red", alpha=0.3, linewidth=0.8, label="events" if k == 0 else None)
    ax.set_xlabel("time")
    ax.set_title(f"exact heat flow, sample {s}")
    return finish(ax, path)


def plot_convergence_study(study, ax=None, path=None):
    """Euler's error against the exact flow versus ``dt`` (log-log), with a first-order reference line.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> net = sl.Network.random([2, 4, 1], seed=0)
    >>> ax = plot_convergence_study(sl.convergence_study(net, [[0.5, -1.0]], dts=(0.02, 0.01), times=(1.0,)))
    """
    ax = axes_or_new(ax, figsize=(5, 4))
    for k, t in enumerate(study.times):
        ax.loglog(study.dts, study.errors[:, k], "o-", label=f"t = {t:g}")
    ref = study.errors.max(axis=1)
    ax.loglog(study.dts, ref[-1] * study.dts / study.dts[-1], "k--", linewidth=1, label="slope 1")
    ax.set_xlabel("Euler dt")
    ax.set_ylabel("max |Euler - exact|")
    ax.set_title(f"Euler vs the exact flow (slope {study.slope:.2f})")
    return finish(ax, path)
