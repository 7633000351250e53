"""Section 6.3 and appendix E.3: spectral diagnostics along training and over initialisations."""

import numpy as np

from ..network.model import Network
from ..plotting.figure import new_figure
from ..plotting.spectral import plot_histogram, plot_tracking
from ..spectral.drivers import spectrum
from . import gap_depth
from .output import MISMATCH
from .stages import STAGES, paraboloid_runs, random_inputs

LABELS = {"lambda_min": r"$\lambda_1$", "lambda_max": r"$\lambda_{\max}$", "condition": r"$\kappa$"}


def tracking(outputs, quick):
    """``fig:spectral-gap-tracking``: lambda_1 (median and IQR over 50 inputs) and training loss, per method."""
    _, runs = paraboloid_runs(quick)
    fig, axes = new_figure(1, 2, figsize=(11, 4), sharey=True)
    for ax, method in zip(axes, ("sheaf", "sgd")):
        snap, history, _ = runs[method]
        plot_tracking(snap.tracker, "lambda_min", ax=ax, labels=[r"$\lambda_1$"])
        loss = ax.twinx()
        loss.semilogy(history.step, history.train_loss, color="0.3", lw=1, label="training loss")
        loss.set_ylabel("training loss")
        ax.set_title(f"{'sheaf' if method == 'sheaf' else 'SGD'} training")
    fig.tight_layout()
    med = {m: round(float(runs[m][0].tracker.series("lambda_min")[1][-1]), 4) for m in runs}
    return outputs.figure(fig, "spectral_gap_tracking"), f"final median lambda_1: {med}"


def comparisons(outputs, quick):
    """``fig:spectral-comparisons``: lambda_1, lambda_max and the condition number over training."""
    _, runs = paraboloid_runs(quick)
    fig, axes = new_figure(1, 3, figsize=(15, 4))
    trackers = [runs[m][0].tracker for m in ("sheaf", "sgd")]
    for ax, quantity in zip(axes, ("lambda_min", "lambda_max", "condition")):
        plot_tracking(trackers, quantity, ax=ax, labels=["sheaf", "SGD"])
        ax.set_title(LABELS[quantity] + " (median, IQR over 50 inputs)")
    fig.tight_layout()
    return outputs.figure(fig, "spectral_comparisons"), ""


def histograms(outputs, quick):
    """``fig:spectral-histograms``: lambda_1 over 100 random inputs at the three training stages."""
    _, runs = paraboloid_runs(quick)
    X = random_inputs(100)
    fig, axes = new_figure(1, 2, figsize=(11, 4), sharex=True)
    results = {m: [spectrum(runs[m][0].networks[s], X, vectors=False, progress=False) for s in STAGES[quick]]
               for m in ("sheaf", "sgd")}
    lo = min(r.lambda_min.min() for rs in results.values() for r in rs)
    hi = max(r.lambda_min.max() for rs in results.values() for r in rs)
    for ax, method in zip(axes, ("sheaf", "sgd")):
        plot_histogram(results[method], labels=[f"{s} steps" for s in STAGES[quick]], ax=ax)
        ax.set_xlim(lo * 0.8, hi * 1.25)
        ax.set_title(f"{'sheaf' if method == 'sheaf' else 'SGD'} training")
    fig.tight_layout()
    notes = "; ".join(f"{m}: median lambda_1 " + ", ".join(f"{np.median(r.lambda_min):.4g}" for r in rs)
                      for m, rs in results.items())
    return outputs.figure(fig, "spectral_histograms"), notes


def initialisations(outputs, quick):
    """lambda_1 (median over 50 inputs) over 100 He initialisations, for the three depths of appendix E.3."""
    X = gap_depth.load_record()[0]
    n_init = 10 if quick else 100
    fig, ax = new_figure(figsize=(6, 4))
    values = {}
    for dims in gap_depth.ARCHS:
        values[str(dims)] = np.array([np.median(spectrum(Network.random(dims, seed=s), X, vectors=False,
                                                         progress=False).lambda_min) for s in range(n_init)])
    edges = np.geomspace(min(v.min() for v in values.values()) * 0.9, max(v.max() for v in values.values()) * 1.1, 25)
    for name, v in values.items():
        ax.hist(v, bins=edges, alpha=0.5, label=name)
    ax.set_xscale("log")
    ax.set_xlabel(r"median $\lambda_1$ over 50 inputs")
    ax.set_ylabel("initialisations")
    ax.set_title(f"{n_init} He initialisations (seeds 0..{n_init - 1})")
    ax.legend()
    fig.tight_layout()
    notes = "; ".join(f"{k}: median {np.median(v):.4g}" for k, v in values.items())
    return outputs.figure(fig, "lambda1_initialisations"), notes


def gap_vs_depth(outputs, quick):
    """``tab:spectral-gap-depth`` from the paper's own networks, and ``fig:eigvec-energy``."""
    rows = gap_depth.compute()
    paths = outputs.table("spectral_gap_depth", *gap_depth.tables(rows))
    paths += outputs.figure(gap_depth.energy_figure(), "eigvec_energy")
    dev = max(r[-1] for r in rows)
    decreasing = all(a[1] > b[1] for a, b in zip(rows, rows[1:]))
    verdict = "reproduced" if dev < gap_depth.RECORD_TOL and decreasing else MISMATCH
    return paths, (f"medians {', '.join(f'{r[1]:.4f}' for r in rows)} (paper 0.2248, 0.0602, 0.0281), "
                   f"{'decreasing' if decreasing else 'NOT decreasing'} with depth; recorded lambda_1 {verdict} "
                   f"(largest relative deviation {dev:.1e})")
