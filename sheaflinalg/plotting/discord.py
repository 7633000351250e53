"""Figures of per-coordinate discord: edge residuals against the pre-activation, active vs inactive.

Colours are colour-blind safe (Okabe-Ito): active coordinates (``z_j >= 0``)
orange, inactive ones reddish purple, as in the paper's figures.
"""

import numpy as np

from .figure import new_figure, save_figure

ACTIVE, INACTIVE, OUTPUT = "#E69F00", "#CC79A7", "#0072B2"


def plot_residuals(result, path=None, edges=None, axes=None, ylim=None, title=None):
    """Scatter each edge's residual against its pre-activation ``z_j``, one panel per edge.

    Parameters
    ----------
    result : PinnedDiscord or EdgeResiduals
        A pinned analysis (:func:`sheaflinalg.discord.pinned`) or the
        residuals of any state (:func:`sheaflinalg.discord.residuals`).
    path : str, optional
        Write the figure here (PNG, PDF, ... by the extension), atomically.
    edges : list of str, optional
        Edges to draw (default: every one, ``W1, R1, W2, ...``).
    axes : sequence of matplotlib Axes, optional
        Draw into these (one per edge) instead of a new figure.
    ylim : (float, float), optional
        Shared y-limits (e.g. to compare training stages).
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> from sheaflinalg.plotting.discord import plot_residuals
    >>> X, Y = sl.tasks.paraboloid(30, seed=0)
    >>> fig = plot_residuals(sl.discord.pinned(sl.Network.random([2, 6, 1], seed=0), X, Y))
    >>> len(fig.axes)
    3
    """
    res = getattr(result, "residuals", result)
    names = list(edges) if edges is not None else res.edge_names
    if axes is None:
        fig, axes = new_figure(1, len(names), figsize=(3.6 * len(names), 3.2), squeeze=False)
        axes = axes[0]
    else:
        fig = axes[0].figure
    for ax, name in zip(axes, names):
        r, z, on = res[name], res.z[res.edge_names.index(name)], res.active(name)
        ax.axhline(0.0, color="0.6", lw=0.8)
        if name == f"W{res.layout.n_hidden + 1}" or name == "out":   # the output layer has no ReLU
            ax.scatter(z, r, s=6, color=OUTPUT, label="output layer")
        else:
            ax.scatter(z[on], r[on], s=6, color=ACTIVE, label="active ($z_j \\geq 0$)")
            ax.scatter(z[~on], r[~on], s=6, color=INACTIVE, label="inactive ($z_j < 0$)")
        kind = "weight" if name.startswith("W") else ("ReLU" if name.startswith("R") else "output")
        ax.set_title(f"{name} ({kind} edge)")
        ax.set_xlabel(f"pre-activation $z_j$ of layer {name[1:] or 'out'}")
        ax.set_ylabel("residual")
        if ylim is not None:
            ax.set_ylim(*ylim)
    axes[0].legend(loc="best", fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path)
    return fig


def residual_limits(*results, margin=0.05):
    """Common y-limits covering the residuals of several results (for stage-by-stage figures)."""
    values = np.concatenate([np.concatenate([r.ravel() for r in getattr(x, "residuals", x).values])
                             for x in results])
    lo, hi = float(values.min()), float(values.max())
    pad = margin * max(hi - lo, 1e-12)
    return lo - pad, hi + pad
