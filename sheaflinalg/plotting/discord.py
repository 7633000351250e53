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
    if not hasattr(res, "z"):
        raise TypeError("plot_residuals draws a chain's residuals against its pre-activations; for a graph "
                        "network use plot_node_discord")
    names = list(edges) if edges is not None else res.edge_names
    fig, axes = _panels(axes, len(names), (3.6 * len(names), 3.2))
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
    return _finish(fig, title, path)


def residual_limits(*results, margin=0.05):
    """Common y-limits covering the residuals of several results (for stage-by-stage figures)."""
    values = np.concatenate([np.concatenate([r.ravel() for r in getattr(x, "residuals", x).values])
                             for x in results])
    lo, hi = float(values.min()), float(values.max())
    pad = margin * max(hi - lo, 1e-12)
    return lo - pad, hi + pad


def plot_node_discord(result, path=None, node=None, axes=None, title=None):
    """A graph network's discord per node (bars) and per channel of one node (samples x channels heat map).

    Bars of pattern nodes (relu, leaky_relu, maxpool) are orange, the others blue.

    Parameters
    ----------
    result : PinnedDiscord or NodeResiduals
        Of a graph network (:func:`sheaflinalg.discord.pinned`, :func:`sheaflinalg.discord.residuals`).
    path : str, optional
        Write the figure here (PNG, PDF, ... by the extension), atomically.
    node : str, optional
        The node of the heat map (default: the feature map with the largest mean discord).
    axes : (Axes, Axes), optional
        The bar and heat-map panels to draw into (default: a new figure's).
    title : str, optional
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> conv = sl.Node("c", "conv", ["x"], {"stride": 1, "padding": 0, "dilation": 1, "groups": 1},
    ...                {"weight": np.ones((2, 1, 3)), "bias": np.zeros(2)})
    >>> net = sl.Network.from_nodes((1, 6), [conv, sl.Node("r", "relu", ["c"]), sl.Node("f", "reshape", ["r"],
    ...                                      {"shape": (8,)})])
    >>> X = np.random.default_rng(0).normal(size=(4, 6))
    >>> fig = sl.plotting.discord.plot_node_discord(sl.discord.pinned(net, X, net.forward(X) + 0.1), node="c")
    >>> [ax.get_title() for ax in fig.axes[:2]]
    ['discord per node', 'discord of c per channel']
    """
    res = getattr(result, "residuals", result)
    if not hasattr(res, "by_channel"):
        raise TypeError("plot_node_discord draws a graph network's discord; for a chain use plot_residuals")
    names = res.edge_names
    mean = 2.0 * res.by_edge().mean(axis=0)           # the paper's discord ||r||^2
    if node is None:       # the feature map (a shape with positions) with the most discord, else any node
        maps = [j for j, name in enumerate(names) if len(res.shape(name)) > 1] or list(range(len(names)))
        node = names[max(maps, key=lambda j: mean[j])]
    channels = 2.0 * res.by_channel(node)             # checks the name (did you mean ...?)
    fig, (bars, heat) = _panels(axes, 2, (4.0 + 0.25 * len(names), 3.6))
    colours = [ACTIVE if name in res.pattern else OUTPUT for name in names]
    bars.bar(np.arange(len(names)), mean, color=colours)
    bars.set_xticks(np.arange(len(names)))
    bars.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
    bars.set_ylabel("mean discord $\\|r\\|^2$")
    bars.set_title("discord per node")
    image = heat.imshow(channels, aspect="auto", cmap="viridis", interpolation="nearest")
    heat.set_xlabel("channel")
    heat.set_ylabel("sample")
    heat.set_title(f"discord of {node} per channel")
    fig.colorbar(image, ax=heat, shrink=0.8, label="$\\|r\\|^2$")
    return _finish(fig, title, path)


def _panels(axes, n, figsize):
    """``(figure, n axes in a row)``: the given ``axes`` or a new figure's."""
    if axes is None:
        fig, axes = new_figure(1, n, figsize=figsize, squeeze=False)
        return fig, axes[0]
    return axes[0].figure, axes


def _finish(fig, title, path):
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path)
    return fig
