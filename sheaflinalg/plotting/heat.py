"""Figures of heat-equation runs: the convergence dashboard and phase planes (paper section 6.1,
appendix E.1)."""

import numpy as np

from .figure import axes_or_new, finish, new_figure, save_figure


def check_phase_neurons(lay, layer, neurons):
    """``(i, j)`` of two distinct neurons of hidden ``layer``, or ValueError naming ``layer`` / ``neurons``."""
    if not 1 <= layer <= lay.n_hidden:
        raise ValueError(f"layer must be a hidden layer in 1..{lay.n_hidden}, got {layer}")
    size = lay.free_block(lay.z(layer)).size
    i, j = neurons
    if not (0 <= i < size and 0 <= j < size) or i == j:
        raise ValueError(f"neurons must be two distinct indices in [0, {size}), got {neurons}")
    return i, j


def phase_axes(ax, block, i, j, path):
    """The ReLU boundaries ``z = 0``, axis labels (``block[i]``, ``block[j]``), legend and file of a phase plane;
    returns ``ax``."""
    ax.axvline(0, color="grey", linestyle="--", linewidth=1)
    ax.axhline(0, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel(f"{block}[{i}]")
    ax.set_ylabel(f"{block}[{j}]")
    return finish(ax, path, loc="best")


def _floor(y):
    return np.maximum(y, 1e-300)


def plot_convergence(result, forward=None, path=None, sample=0):
    """Convergence dashboard: total discord, discord by edge type, by layer, output trajectory.

    Parameters
    ----------
    result : HeatResult
        A run with ``record_every > 0``.
    forward : array_like, optional
        Forward-pass output of ``sample`` (drawn dashed).
    path : str, optional
        Write the figure there (atomically).
    sample : int
        Sample whose output trajectory is drawn.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> net = sl.Network.random([2, 4, 1], seed=0)
    >>> res = sl.heat(net, [0.5, -1.0], dt=0.01, record_every=10, seed=1, progress=False)
    >>> fig = plot_convergence(res, forward=net.forward([0.5, -1.0]))
    >>> len(fig.axes)
    4
    """
    h = result.history
    if h is None or len(h.steps) == 0:
        raise ValueError("plot_convergence needs a run recorded with record_every > 0")
    if not 0 <= sample < h.output.shape[1]:
        raise ValueError(f"sample {sample} out of range for {h.output.shape[1]} samples")
    fig, axes = new_figure(2, 2, figsize=(10, 7))
    t = h.steps
    ax = axes[0, 0]
    ax.semilogy(t, _floor(h.total), color="k")
    ax.set_title("total discord")
    ax = axes[0, 1]
    for name, y in h.by_type().items():
        ax.semilogy(t, _floor(y), label=name)
    ax.set_title("discord by edge type")
    ax.legend()
    ax = axes[1, 0]
    for layer, y in h.by_layer().items():
        ax.semilogy(t, _floor(y), label=f"layer {layer}" if isinstance(layer, int) else layer)
    ax.set_title("discord by layer")
    ax.legend()
    ax = axes[1, 1]
    for j in range(h.output.shape[2]):
        ax.plot(t, h.output[:, sample, j], label=f"output stalk [{j}]")
    if forward is not None:
        for v in np.atleast_2d(forward)[0]:
            ax.axhline(v, color="k", linestyle="--", linewidth=1)
    ax.set_title(f"output stalk, sample {sample}")
    for a in axes.ravel():
        a.set_xlabel("Euler step")
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path)
    return fig


def plot_phase_plane(result, sample=0, layer=1, neurons=(0, 1), ax=None, path=None):
    """Trajectory of two pre-activations ``(z_layer[i], z_layer[j])`` with ReLU boundaries and crossings.

    Needs a run with ``record_states`` containing ``sample``.  Crossings are
    marked at the recorded state nearest to their step (exact with ``record_every=1``).

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> net = sl.Network.random([2, 4, 1], seed=0)
    >>> res = sl.heat(net, [0.5, -1.0], dt=0.01, record_every=1, record_states=[0], seed=1,
    ...               progress=False)
    >>> ax = plot_phase_plane(res, neurons=(0, 2))
    """
    h = result.history
    if h is None or sample not in list(h.state_samples):
        raise ValueError(f"plot_phase_plane needs record_every > 0 and record_states including sample {sample}")
    lay = result.layout
    i, j = check_phase_neurons(lay, layer, neurons)
    ax = axes_or_new(ax, figsize=(5, 5))
    row = list(h.state_samples).index(sample)
    z = h.states[:, row, lay.free(lay.z(layer))]
    x, y = z[:, i], z[:, j]
    # Light (early) to dark (late) on a log time scale: crossings happen early.
    steps = h.steps.astype(float)
    c = np.log1p(steps) / max(np.log1p(steps[-1]), 1e-300)
    ax.scatter(x, y, c=c, cmap="Blues", vmin=-0.4, vmax=1.0, s=6, zorder=2)
    ax.plot(x, y, color="tab:blue", alpha=0.3, linewidth=0.8, zorder=1)
    cr = result.crossings
    sel = (cr[:, 1] == sample) & (cr[:, 2] == layer) & np.isin(cr[:, 3], [i, j]) if len(cr) else []
    if len(cr) and np.any(sel):
        idx = np.searchsorted(h.steps, cr[sel, 0]).clip(0, len(h.steps) - 1)
        ax.scatter(x[idx], y[idx], marker="x", color="red", s=30, zorder=3, label="boundary crossings")
    ax.scatter([x[-1]], [y[-1]], marker="*", color="gold", edgecolor="k", s=150, zorder=4, label="final state")
    return phase_axes(ax, lay.z(layer), i, j, path)
