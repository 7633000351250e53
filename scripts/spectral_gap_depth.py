"""Reproduce the spectral-gap-vs-depth table and the eigenvector-energy figure of appendix E.3.

Protocol (``shared/reference-protocols.md``): He-initialised networks with
seed 42, the first 50 paraboloid training inputs (seed 42), ``lambda_1`` the
smallest eigenvalue of the reduced ``L[Omega, Omega]`` (identity output) of
each input's activation pattern; median and standard deviation over the 50
inputs, for ``[2,30,1]``, ``[2,10,8,1]`` and ``[2,8,6,4,1]``.  The figure
shows the per-block energy of the Fiedler (``lambda_1``) and ``lambda_max``
eigenvectors of ``[2,30,1]`` and ``[2,12,8,6,1]`` (mean and std over inputs).

Writes to ``--out`` (default ``results/spectral_gap_depth``):

* ``spectral_gap_depth.md``, ``.tex``, ``.csv``: the table, next to the paper's values;
* ``eigvec_energy.png``: the energy figure.

The paper's weights come from PyTorch's generator, ours from numpy's, so
the numbers differ in value but not in trend (see README).

Usage: ``python scripts/spectral_gap_depth.py [--out DIR] [--seed 42] [--samples 50]``.
"""

import argparse
import csv
import io
import os
import sys

import numpy as np

from sheaflinalg._common.atomic import write_text

ARCHS = ([2, 30, 1], [2, 10, 8, 1], [2, 8, 6, 4, 1])
FIGURE_ARCHS = ([2, 30, 1], [2, 12, 8, 6, 1])
PAPER = {"[2,30,1]": (0.2248, 0.0200), "[2,10,8,1]": (0.0602, 0.0047), "[2,8,6,4,1]": (0.0281, 0.0060)}


def compute(seed=42, samples=50):
    """Rows ``(arch, median, std, paper median, paper std)`` and the figure's results."""
    import sheaflinalg as sl

    X = sl.tasks.make("paraboloid", 300, 100, seed=seed).X_train[:samples]
    rows = []
    for dims in ARCHS:
        res = sl.spectrum(sl.Network.random(dims, seed=seed), X, vectors=False)
        name = "[" + ",".join(map(str, dims)) + "]"
        pm, ps = PAPER.get(name, (float("nan"), float("nan")))
        rows.append((name, float(np.median(res.lambda_min)), float(np.std(res.lambda_min)), pm, ps))
    figure = [(dims, sl.spectrum(sl.Network.random(dims, seed=seed), X)) for dims in FIGURE_ARCHS]
    return rows, figure


def tables(rows):
    md = ["| Architecture | lambda_1 (median) | lambda_1 (std) | paper median | paper std |",
          "|---|---|---|---|---|"]
    tex = [r"\begin{tabular}{lcc}", r"\toprule",
           r"Architecture & $\lambda_1$ (median) & $\lambda_1$ (std) \\", r"\midrule"]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["architecture", "lambda1_median", "lambda1_std", "paper_median", "paper_std"])
    for name, med, std, pm, ps in rows:
        md.append(f"| `{name}` | {med:.4f} | {std:.4f} | {pm:.4f} | {ps:.4f} |")
        tex.append(rf"  \texttt{{{name}}} & {med:.4f} & {std:.4f} \\")
        w.writerow([name, f"{med:.6g}", f"{std:.6g}", pm, ps])
    tex += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(md) + "\n", "\n".join(tex) + "\n", buf.getvalue()


def energy_figure(figure, path):
    from sheaflinalg.plotting.spectral import _plt, plot_block_energy, save_figure

    plt = _plt()
    fig, axes = plt.subplots(2, len(figure), figsize=(5 * len(figure), 7), squeeze=False)
    for j, (dims, res) in enumerate(figure):
        for i, which in enumerate(("smallest", "largest")):
            ax = plot_block_energy(res, which, ax=axes[i, j])
            ax.set_title(f"{dims}: " + (r"Fiedler ($\lambda_1$)" if which == "smallest" else r"$\lambda_{\max}$"))
    fig.tight_layout()
    save_figure(fig, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="results/spectral_gap_depth", help="output directory")
    parser.add_argument("--seed", type=int, default=42, help="seed of the networks and inputs (default 42)")
    parser.add_argument("--samples", type=int, default=50, help="paraboloid training inputs (default 50)")
    parser.add_argument("--no-figure", action="store_true", help="skip the energy figure")
    args = parser.parse_args(argv)
    if args.samples < 1:
        parser.error("--samples must be at least 1")
    rows, figure = compute(args.seed, args.samples)
    os.makedirs(args.out, exist_ok=True)
    md, tex, csv_text = tables(rows)
    for ext, text in (("md", md), ("tex", tex), ("csv", csv_text)):
        write_text(os.path.join(args.out, f"spectral_gap_depth.{ext}"), text)
    print(md)
    if not args.no_figure:
        energy_figure(figure, os.path.join(args.out, "eigvec_energy.png"))
        print(f"wrote {os.path.join(args.out, 'eigvec_energy.png')}")
    decreasing = all(a[1] > b[1] for a, b in zip(rows, rows[1:]))
    print("lambda_1 decreases with depth:", "yes" if decreasing else "NO")
    return 0


if __name__ == "__main__":
    sys.exit(main())
