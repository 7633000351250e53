"""Figures of a case study: a quantity compared across groups of inputs, node by node and channel by channel.

* :func:`plot_groups`: one value per input (``lambda_1``, a total discord) as a box and its points per group;
* :func:`plot_node_profile`: a per-node quantity (eigenvector energy, discord), median and quartiles per group;
* :func:`plot_channel_map`: a per-channel quantity of several feature-map nodes as a heat map;
* :func:`plot_training_record`: training loss and test accuracy per epoch.

They take plain arrays (so any diagnostic fits), an optional ``ax``, and return the axes.
"""

import numpy as np

from .figure import axes_or_new

GROUP_COLOURS = ("C0", "C3", "C2", "C1", "C4", "C5")
LOG_RANGE = 6             # decades shown by a log-scaled heat map


def plot_groups(groups, ax=None, log=True, ylabel=None, colours=None):
    """Box plot of one value per input for each group, with the inputs as jittered points.

    Parameters
    ----------
    groups : dict
        ``{label: 1-D array}``; an empty group shows as an empty slot.
    colours : sequence of str, optional
        One colour per group (default: all ``"C0"``).

    Examples
    --------
    >>> import numpy as np
    >>> ax = plot_groups({"a": np.array([1.0, 2.0]), "b": np.array([0.5]), "c": np.array([])})
    >>> [t.get_text() for t in ax.get_xticklabels()]
    ['a\\n(2)', 'b\\n(1)', 'c\\n(0)']
    """
    ax = axes_or_new(ax, figsize=(7, 3.5))
    rng = np.random.default_rng(0)           # the jitter only: the same picture on every run
    labels = list(groups)
    for i, label in enumerate(labels):
        v = np.asarray(groups[label], dtype=float)
        colour = colours[i] if colours else "C0"
        if v.size:
            ax.boxplot([v], positions=[i], widths=0.6, showfliers=False, medianprops={"color": "k"})
            ax.plot(i + rng.uniform(-0.2, 0.2, v.size), v, "o", ms=2.5, alpha=0.5, color=colour)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels([f"{label}\n({np.size(groups[label])})" for label in labels])
    ax.set_xlim(-0.7, len(labels) - 0.3)
    if log:
        ax.set_yscale("log")
    if ylabel:
        ax.set_ylabel(ylabel)
    return ax


def plot_node_profile(nodes, groups, ax=None, log=False, ylabel=None, colours=GROUP_COLOURS):
    """Median (markers) and quartiles (bars) of a per-node quantity, one series per group.

    Parameters
    ----------
    nodes : list of str
        The x axis.
    groups : dict
        ``{label: ndarray (n_inputs, n_nodes)}``; a group without inputs is left out.
    colours : sequence of str
        The groups' colours, in order.

    Examples
    --------
    >>> import numpy as np
    >>> ax = plot_node_profile(["a", "b"], {"x": np.array([[0.2, 0.8], [0.4, 0.6]])})
    >>> len(ax.get_lines()) >= 1
    True
    """
    ax = axes_or_new(ax, figsize=(7, 3.5))
    shown = [(label, np.asarray(v, dtype=float)) for label, v in groups.items() if np.size(v)]
    width = 0.8 / max(1, len(shown))
    x = np.arange(len(nodes), dtype=float)
    for i, (label, v) in enumerate(shown):
        lo, med, hi = np.percentile(v, [25, 50, 75], axis=0)
        pos = x + (i - (len(shown) - 1) / 2) * width
        colour = colours[list(groups).index(label) % len(colours)]
        ax.errorbar(pos, med, yerr=[med - lo, hi - med], fmt="o", ms=4, capsize=2, color=colour,
                    label=f"{label} ({v.shape[0]})")
    ax.set_xticks(x)
    ax.set_xticklabels(nodes, rotation=30, ha="right")
    if log:
        ax.set_yscale("log")
    if ylabel:
        ax.set_ylabel(ylabel)
    if shown:
        ax.legend(fontsize=8)
    return ax


def plot_channel_map(rows, ax=None, label=None, log=False, xlabel="channel"):
    """Heat map of a per-channel quantity: one row per node, one column per channel.

    Parameters
    ----------
    rows : dict
        ``{node: 1-D array over its channels}``, all of the same length.
    log : bool
        Colour on a log scale over at most :data:`LOG_RANGE` decades below the largest value (smaller
        values and zeros, such as dead channels, show as the floor).
    xlabel : str
        What a column is (a channel, an attention head).

    Examples
    --------
    >>> import numpy as np
    >>> ax = plot_channel_map({"conv1": np.arange(4.0), "relu1": np.ones(4)}, label="energy")
    >>> [t.get_text() for t in ax.get_yticklabels()]
    ['conv1', 'relu1']
    """
    from matplotlib.colors import LogNorm
    from matplotlib.ticker import MaxNLocator

    ax = axes_or_new(ax, figsize=(7, 3))
    M = np.array([np.asarray(v, dtype=float) for v in rows.values()])
    norm = None
    if log:
        positive = M[M > 0]
        floor = max(positive.min(), positive.max() * 10.0 ** -LOG_RANGE) if positive.size else 1.0
        M = np.maximum(M, floor)
        norm = LogNorm(vmin=floor, vmax=max(floor, M.max()))
    image = ax.imshow(M, aspect="auto", interpolation="nearest", cmap="viridis", norm=norm)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(list(rows))
    ax.set_xlabel(xlabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.figure.colorbar(image, ax=ax, label=label)
    return ax


def plot_training_record(loss, accuracy, ax=None):
    """Training loss (log scale, left) and test accuracy (right) against the epoch.

    Examples
    --------
    >>> ax = plot_training_record([2.0, 1.0, 0.5], [0.3, 0.6, 0.8])
    >>> ax.get_yscale()
    'log'
    """
    ax = axes_or_new(ax, figsize=(6, 3.5))
    epochs = np.arange(1, len(loss) + 1)
    ax.semilogy(epochs, loss, color="C0", label="training loss")
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss (cross-entropy)", color="C0")
    right = ax.twinx()
    right.plot(epochs, accuracy, color="C3", label="test accuracy")
    right.set_ylabel("test accuracy", color="C3")
    right.set_ylim(0, 1)
    return ax
