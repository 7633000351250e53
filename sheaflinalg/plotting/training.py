"""Figures of training runs: loss curves and the learned outputs of appendix E.2."""

import numpy as np

from .figure import axes_or_new, new_figure, save_figure


def plot_curves(histories, ax=None, key="train_loss", x="step", labels=None, logy=True):
    """Plot one series of several histories against ``x`` (``"step"`` or ``"epoch"``).

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> from sheaflinalg.plotting.training import plot_curves
    >>> X, Y = sl.tasks.paraboloid(50, seed=0)
    >>> h = sl.sgd(sl.Network.random([2, 4, 1]), X, Y, epochs=100, progress=False).history
    >>> ax = plot_curves([h])
    """
    ax = axes_or_new(ax)
    for i, h in enumerate(histories):
        label = labels[i] if labels else h.method
        ax.plot(h[x], h[key], label=label)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("Euler steps / SGD epochs" if x == "step" else x)
    ax.set_ylabel(key.replace("_", " "))
    ax.legend()
    return ax


def _grid(X, n=150, pad=0.1):
    lo, hi = X.min(axis=0), X.max(axis=0)
    span = hi - lo
    g0 = np.linspace(lo[0] - pad * span[0], hi[0] + pad * span[0], n)
    g1 = np.linspace(lo[1] - pad * span[1], hi[1] + pad * span[1], n)
    G0, G1 = np.meshgrid(g0, g1)
    return G0, G1, np.column_stack([G0.ravel(), G1.ravel()])


def plot_learned_outputs(rows, path=None):
    """The figure of appendix E.2: target / sheaf-trained / SGD-trained output per task.

    Parameters
    ----------
    rows : list of dict
        One per task with ``task`` (name), ``X``, ``Y`` (training data, rows
        are samples), ``target`` (callable ``X -> f(X)`` for regression, or
        None), ``sheaf`` and ``sgd`` (trained :class:`~sheaflinalg.Network`).
    path : str, optional
        Where to save the figure (PNG/PDF by extension).

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = new_figure(len(rows), 3, figsize=(11, 3.2 * len(rows)), squeeze=False, layout="constrained")
    for r, row in enumerate(rows):
        X, Y = row["X"], row["Y"]
        G0, G1, grid = _grid(X)
        nets = [("Sheaf", row["sheaf"]), ("SGD", row["sgd"])]
        if row.get("target") is not None:
            panels = [("Target", row["target"](grid))] + [(n, net.forward(grid)[:, 0]) for n, net in nets]
            vmin = min(p.min() for _, p in panels)
            vmax = max(p.max() for _, p in panels)
            for c, (name, vals) in enumerate(panels):
                ax = axes[r, c]
                cs = ax.contourf(G0, G1, vals.reshape(G0.shape), levels=20, vmin=vmin, vmax=vmax, cmap="viridis")
                ax.set_title(f"{row['task']}: {name}")
            fig.colorbar(cs, ax=axes[r].tolist(), shrink=0.8)
        else:
            from matplotlib import colormaps
            from matplotlib.colors import ListedColormap

            labels = (Y[:, 0] >= 0.5).astype(int) if Y.shape[1] == 1 else Y.argmax(axis=1)
            n_cls = max(2, Y.shape[1])
            colors = np.array(["#3b4cc0", "#b40426"] if n_cls == 2 else
                              [colormaps["tab10"](i) for i in range(n_cls)], dtype=object)
            cmap = ListedColormap(list(colors))
            point_colors = list(colors[labels])
            axes[r, 0].scatter(X[:, 0], X[:, 1], c=point_colors, s=8)
            axes[r, 0].set_title(f"{row['task']}: data")
            for c, (name, net) in enumerate(nets, start=1):
                P = net.forward(grid)
                cls = (P[:, 0] >= 0.5).astype(int) if P.shape[1] == 1 else P.argmax(axis=1)
                ax = axes[r, c]
                ax.contourf(G0, G1, cls.reshape(G0.shape), alpha=0.3, cmap=cmap,
                            levels=np.arange(-0.5, n_cls + 0.5))
                ax.scatter(X[:, 0], X[:, 1], c=point_colors, s=6)
                ax.set_title(f"{row['task']}: {name}")
        for ax in axes[r]:
            ax.set_aspect("equal", adjustable="box")
    if path is not None:
        save_figure(fig, path)
    return fig
