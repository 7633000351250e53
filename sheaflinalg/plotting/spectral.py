"""Figures of the spectral diagnostics (paper section 6.3, appendix E.3).

* :func:`plot_spectra`: the spectrum of ``L[Omega, Omega]`` of every input, overlaid;
* :func:`plot_block_energy`: eigenvector energy per block (mean and std over inputs);
* :func:`plot_tracking`: a :class:`~sheaflinalg.SpectralTracker` series, median and IQR;
* :func:`plot_histogram`: the distribution of ``lambda_1`` over inputs, log bins;
* :func:`spectra_figure`: the two-panel figure of ``sheaflinalg spectrum --plot``.

All functions take an optional ``ax`` and return it; ``path`` arguments save
atomically.
"""

import numpy as np

from .figure import axes_or_new, new_figure, save_figure


def plot_spectra(result, ax=None):
    """Eigenvalues of every input against their index (log scale), overlaid.

    Uses the whole spectrum when the result has it (``full=True``), else the
    ``k`` smallest and largest eigenvalues.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> from sheaflinalg.plotting.spectral import plot_spectra
    >>> sp = sl.spectrum(sl.Network.random([2, 6, 1], seed=0), np.ones((3, 2)), full=True)
    >>> ax = plot_spectra(sp)
    """
    ax = axes_or_new(ax)
    if result.eigenvalues is not None:
        W = result.eigenvalues
        idx = np.arange(1, W.shape[1] + 1)
        for w in W:
            ax.plot(idx, w, color="C0", alpha=max(0.05, min(0.6, 3.0 / len(W))), lw=1)
        ax.plot(idx, np.median(W, axis=0), color="k", lw=1.5, label="median over inputs")
        ax.set_xlabel("eigenvalue index")
    else:
        k = result.smallest.shape[1]
        for j in range(k):
            ax.plot(np.full(result.n_samples, j + 1), result.smallest[:, j], "o", color="C0", alpha=0.4, ms=3)
            ax.plot(np.full(result.n_samples, 2 * k + 2 - j), result.largest[:, j], "o", color="C3",
                    alpha=0.4, ms=3)
        ax.set_xticks([1, 2 * k + 2])
        ax.set_xticklabels(["smallest", "largest"])
    ax.set_yscale("log")
    ax.set_ylabel(r"eigenvalue of $L[\Omega,\Omega]$")
    ax.set_title(f"{result.n_samples} inputs; median $\\lambda_1$ = {np.median(result.lambda_min):.4g}")
    if result.eigenvalues is not None:
        ax.legend(loc="upper left")
    return ax


def plot_block_energy(result, which="smallest", index=0, ax=None):
    """Bar chart of the eigenvector energy per block, mean over inputs with one-std error bars."""
    ax = axes_or_new(ax)
    E = result.block_energy(which, index)
    names = result.block_names
    ax.bar(range(len(names)), E.mean(axis=0), yerr=E.std(axis=0), capsize=3,
           color="C0" if which == "smallest" else "C3")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names)
    ax.set_ylim(0, 1)
    ax.set_ylabel("energy")
    label = r"$\lambda_1$ (Fiedler)" if which == "smallest" and index == 0 else (
        r"$\lambda_{\max}$" if which == "largest" and index == 0 else f"{which} #{index + 1}")
    ax.set_title(f"eigenvector energy per block: {label}")
    return ax


def spectra_figure(result, path=None):
    """Spectra and the block energies of the extreme eigenvectors in one figure.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> from sheaflinalg.plotting.spectral import spectra_figure
    >>> fig = spectra_figure(sl.spectrum(sl.Network.random([2, 6, 1], seed=0), np.ones((3, 2)), full=True))
    """
    with_vectors = result.vectors_smallest is not None
    fig, axes = new_figure(1, 3 if with_vectors else 1, figsize=(15 if with_vectors else 5, 4), squeeze=False)
    plot_spectra(result, axes[0, 0])
    if with_vectors:
        plot_block_energy(result, "smallest", ax=axes[0, 1])
        plot_block_energy(result, "largest", ax=axes[0, 2])
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path)
    return fig


def plot_tracking(trackers, quantity="lambda_min", ax=None, labels=None, logy=True):
    """Median and inter-quartile band of one tracked quantity against the step.

    ``trackers``: one :class:`~sheaflinalg.SpectralTracker` or a list of them
    (e.g. a sheaf run and an SGD run); ``quantity``: ``"lambda_min"``,
    ``"lambda_max"`` or ``"condition"``.
    """
    ax = axes_or_new(ax)
    if not isinstance(trackers, (list, tuple)):
        trackers = [trackers]
    for i, tr in enumerate(trackers):
        steps, med = tr.series(quantity, "median")
        _, lo = tr.series(quantity, "q25")
        _, hi = tr.series(quantity, "q75")
        label = labels[i] if labels else (tr.records[0]["method"] if tr.records else None)
        ax.plot(steps, med, label=label, color=f"C{i}")
        ax.fill_between(steps, lo, hi, alpha=0.25, color=f"C{i}")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("Euler steps / SGD epochs")
    ax.set_ylabel({"lambda_min": r"$\lambda_1$", "lambda_max": r"$\lambda_{\max}$",
                   "condition": r"$\kappa = \lambda_{\max}/\lambda_1$"}.get(quantity, quantity))
    if labels or any(tr.records for tr in trackers):
        ax.legend()
    return ax


def plot_histogram(results, labels=None, ax=None, bins=20):
    """Histogram of ``lambda_1`` over the inputs with log-spaced bins (several results overlaid)."""
    ax = axes_or_new(ax)
    if not isinstance(results, (list, tuple)):
        results = [results]
    allv = np.concatenate([r.lambda_min for r in results])
    edges = np.geomspace(allv.min() * 0.9, allv.max() * 1.1, bins + 1)
    for i, r in enumerate(results):
        ax.hist(r.lambda_min, bins=edges, alpha=0.5, label=labels[i] if labels else None)
    ax.set_xscale("log")
    ax.set_xlabel(r"$\lambda_1$")
    ax.set_ylabel("inputs")
    if labels:
        ax.legend()
    return ax
