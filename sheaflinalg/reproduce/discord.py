"""Section 6.3 and appendix E.3: per-coordinate and pinned discord of trained networks.

The networks are pinned on the first 50 test inputs of the paper's paraboloid data, their output
stalk hard-pinned to the labels (:func:`sheaflinalg.discord.pinned`).
"""

import csv
import io

import numpy as np

from ..discord.pinning.analysis import pinned
from ..plotting.discord import plot_residuals, residual_limits
from ..plotting.figure import new_figure
from .stages import STAGES, deep_sheaf_network, paraboloid_runs

N_PINNED = 50
# The paper's table (sheaf-trained, SGD-trained): mean, std per edge and the total.
PAPER = {"W1": ((0.0007, 0.0010), (0.0000, 0.0001)), "R1": ((0.0027, 0.0034), (0.0002, 0.0003)),
         "W2": ((0.0001, 0.0002), (0.0000, 0.0000)), "Total": ((0.0035, None), (0.0003, None))}


def _pinned(net, exp):
    return pinned(net, exp.X_test[:N_PINNED], exp.Y_test[:N_PINNED])


def per_coordinate(outputs, quick):
    """``fig:discord-1H`` ([2,30,1]) and ``fig:discord-3H`` ([2,12,8,6,1]): residuals of sheaf-trained networks."""
    exp, runs = paraboloid_runs(quick)
    pd1 = _pinned(runs["sheaf"][2], exp)
    paths = outputs.figure(plot_residuals(pd1, edges=["W1", "R1"], title="[2,30,1], sheaf-trained"),
                           "discord_2_30_1")
    net, X, Y = deep_sheaf_network(quick)
    pd3 = pinned(net, X[:N_PINNED], Y[:N_PINNED])
    paths += outputs.figure(plot_residuals(pd3, title="[2,12,8,6,1], sheaf-trained"), "discord_2_12_8_6_1")
    return paths, f"total pinned discord: [2,30,1] {pd1.total.mean():.4g}, [2,12,8,6,1] {pd3.total.mean():.4g}"


def residual_stages(outputs, quick):
    """``fig:discord-residuals-sheaf`` and ``-sgd``: residuals at three training stages, shared y-axes."""
    exp, runs = paraboloid_runs(quick)
    stages = STAGES[quick]
    results = {m: [_pinned(runs[m][0].networks[s], exp) for s in stages] for m in ("sheaf", "sgd")}
    ylim = residual_limits(results["sheaf"][1])     # set by the intermediate stage, as in the paper
    paths = []
    for method, label in (("sheaf", "sheaf-trained"), ("sgd", "SGD-trained")):
        fig, axes = new_figure(len(stages), 2, figsize=(8, 3 * len(stages)), squeeze=False)
        for row, (step, pd) in enumerate(zip(stages, results[method])):
            plot_residuals(pd, edges=["W1", "R1"], axes=axes[row], ylim=ylim)
            axes[row, 0].set_title(f"{label}, {step} steps: W1 (weight edge)")
            axes[row, 1].set_title(f"{label}, {step} steps: R1 (ReLU edge)")
        fig.tight_layout()
        paths += outputs.figure(fig, f"discord_residuals_{method}")
    notes = "; ".join(f"{m}: total " + ", ".join(f"{pd.total.mean():.3g}" for pd in rs) for m, rs in results.items())
    return paths, notes


def pinned_table(outputs, quick):
    """``tab:pinned-discord``: mean +- std of the discord ``||r||^2`` per edge over 50 test inputs, sheaf- vs SGD-trained."""
    exp, runs = paraboloid_runs(quick)
    summary = {m: _pinned(runs[m][2], exp).summary() for m in ("sheaf", "sgd")}
    edges = list(summary["sheaf"])

    def cell(mean_std):
        mean, std = mean_std
        return f"{mean:.4f}" if std is None else f"{mean:.4f} +- {std:.4f}"

    md = ["| Edge | Sheaf-trained | SGD-trained | paper: sheaf | paper: SGD |", "|---|---|---|---|---|"]
    tex = [r"\begin{tabular}{lcc}", r"\toprule", r"Edge & Sheaf-trained & SGD-trained \\", r"\midrule"]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["edge", "sheaf_mean", "sheaf_std", "sgd_mean", "sgd_std"])
    for e in edges:
        s, g = summary["sheaf"][e], summary["sgd"][e]
        paper = PAPER.get(e, ((np.nan, None), (np.nan, None)))
        md.append(f"| {e} | {cell(s)} | {cell(g)} | {cell(paper[0])} | {cell(paper[1])} |")
        tex.append(f"  {e} & {s[0]:.4f} $\\pm$ {s[1]:.4f} & {g[0]:.4f} $\\pm$ {g[1]:.4f} \\\\")
        w.writerow([e, repr(s[0]), repr(s[1]), repr(g[0]), repr(g[1])])
    tex += [r"\bottomrule", r"\end{tabular}"]
    paths = outputs.table("pinned_discord", "\n".join(md) + "\n", "\n".join(tex) + "\n", buf.getvalue())
    return paths, f"total: sheaf {summary['sheaf']['Total'][0]:.4f}, SGD {summary['sgd']['Total'][0]:.4f} " \
                  f"(paper 0.0035, 0.0003)"
