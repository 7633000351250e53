"""Section 6.2 and appendix E.4: the paper's two sweeps (beta scaling, integration time x depth),
run from the shipped specs (package data ``sweeps/*.toml``) with :mod:`sheaflinalg.sweep` and replayed
from their records.

Quick mode runs their quick variants: the beta sweep for two values of beta and 3000 steps, the
integration-time sweep for its runs of at most 1000 steps.
"""

import tomllib

from .. import sweep
from .._common.resources import data_path
from ..plotting.figure import new_figure
from ..plotting.sweep import plot_sweep

def _spec(name, quick):
    with open(data_path("sweeps", f"{name}.toml"), "rb") as f:
        raw = tomllib.load(f)
    if quick and name == "beta_scaling_batch":
        raw["fixed"]["steps"] = 3000
        raw["grid"].update(beta_M={"logspace": [-1, 1, 3]}, n_train=[100, 300], seed=[0])
    elif quick and name == "beta_scaling":
        raw["fixed"]["steps"] = 3000
        raw["grid"]["beta"] = [0.001, 0.00333]
    elif quick:
        keep = [i for i, s in enumerate(raw["zip"]["steps"]) if s <= 1000]
        raw["zip"] = {k: [v[i] for i in keep] for k, v in raw["zip"].items()}
    return raw


def _rows(outputs, name, quick, jobs):
    raw = _spec(name, quick)
    db = outputs.path("cache", f"sweep_{name}_{'quick' if quick else 'full'}.db")
    sweep.run(raw, db, jobs=jobs, progress=False)
    rows = [dict(r["params"], **r["metrics"], status=r["status"]) for r in sweep.load(db, records=True)
            if r["sweep"] == raw["sweep"]["name"]]
    if "max_rel_error_to_record" not in raw["sweep"]["metrics"]:
        return rows, f"{len(rows)} runs"
    worst = max(r["max_rel_error_to_record"] for r in rows)
    return rows, f"{len(rows)} runs; largest relative deviation from the recorded curves {worst:.1e}"


def beta_scaling(outputs, quick, jobs=1):
    """``fig:beta-scaling``: final test loss against beta M.  Left: the paper's sweep replayed (M = 300,
    mean and std over its three seeds); right: batch sizes M = 100, 300, 1000 on the same beta M grid."""
    rows, notes = _rows(outputs, "beta_scaling", quick, jobs)
    batch, batch_notes = _rows(outputs, "beta_scaling_batch", quick, jobs)
    fig, axes = new_figure(1, 2, figsize=(11, 4), sharey=True)
    plot_sweep(rows, "beta_M", "final_test_loss", hue="n_train", ax=axes[0], mark=1.0, logx=True)
    plot_sweep(batch, "beta_M", "final_test_loss", hue="n_train", ax=axes[1], mark=1.0, logx=True)
    axes[0].set_title("the paper's sweep, replayed from its record")
    axes[1].set_title("three batch sizes (fresh data, two seeds)")
    for ax in axes:
        ax.set_xlabel(r"$\beta M$ ($M = n_{\mathrm{train}}$; dashed: the default $\beta = 1/M$)")
    axes[0].set_ylabel("final test loss (MSE)")
    axes[1].set_ylabel("")
    fig.tight_layout()
    best = min(rows, key=lambda r: r["final_test_loss"])
    return outputs.figure(fig, "beta_scaling"), (f"{notes}; smallest test loss {best['final_test_loss']:.3f} at "
                                                 f"beta = {best['beta']:g}; batch sizes: {batch_notes}")


def integration_time(outputs, quick, jobs=1):
    """``fig:depth-T-sweep``: final test loss against the integration time T, three depths."""
    rows, notes = _rows(outputs, "integration_time", quick, jobs)
    fig, ax = new_figure(figsize=(6, 4))
    plot_sweep(rows, "T", "final_test_loss", hue="group", ax=ax, logx=True)
    ax.set_xlabel(r"integration time $T = \Delta t \times n_{\mathrm{steps}}$ (nominal)")
    ax.set_ylabel("final test loss (MSE)")
    final = {g: round(float(max((r for r in rows if r["group"] == g), key=lambda r: r["T"])["final_test_loss"]), 3)
             for g in sorted({r["group"] for r in rows})}
    return outputs.figure(fig, "integration_time"), f"{notes}; final test loss at the largest T: {final}"
