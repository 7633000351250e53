"""The spectral gap vs depth table of appendix E.3 from the paper's own networks, and the
eigenvector-energy figure.

The record ``spectral_gap_depth.npz`` (package data) holds the 50 paraboloid inputs and
the seed-42 He weights the paper drew with PyTorch's generator for
``[2,30,1]``, ``[2,10,8,1]`` and ``[2,8,6,4,1]``, with the paper's
``lambda_1`` per input: replaying them gives the paper's numbers, not only
its trend.  The energy figure (Fiedler and ``lambda_max`` eigenvectors of
``[2,30,1]`` and ``[2,12,8,6,1]``) uses the recorded ``[2,30,1]`` network and
a seed-42 He network of ours for the other (the record has no such network).
"""

import csv
import io
import json
import zipfile
from pathlib import Path

import numpy as np

from .._common.resources import data_path
from ..network.model import Network
from ..plotting.figure import new_figure
from ..plotting.spectral import plot_block_energy
from ..spectral.drivers import spectrum

RECORD = data_path("spectral_gap_depth.npz")
TAGS = ("1H", "2H", "3H")
RECORD_TOL = 1e-8                  # relative deviation of every input's lambda_1 from the record
ARCHS = ([2, 30, 1], [2, 10, 8, 1], [2, 8, 6, 4, 1])


def load_record(path=RECORD):
    """``(X, {tag: (network, recorded gaps)}, {tag: (paper median, paper std)})`` from the record.

    Every entry is checked (dtype, shape, finiteness, consistency with the architectures) before use.
    """
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
        meta = json.loads(str(arrays.pop("meta")))
        archs, paper = meta["archs"], meta["paper"]
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError, TypeError) as exc:
        raise ValueError(f"{path}: not a readable spectral-gap record ({exc})") from None

    def entry(name, shape):
        a = arrays.get(name)
        if a is None or a.dtype != np.float64 or a.shape != tuple(shape) or not np.all(np.isfinite(a)):
            raise ValueError(f"{path}: entry {name!r} must be finite float64 of shape {tuple(shape)}")
        return a

    X = entry("X", (arrays.get("X", np.empty(0)).shape[0], 2))
    nets = {}
    for tag in TAGS:
        dims = [int(d) for d in archs[tag]]
        W = [entry(f"W{l}_{tag}", (dims[l], dims[l - 1])) for l in range(1, len(dims))]
        b = [entry(f"b{l}_{tag}", (dims[l],)) for l in range(1, len(dims))]
        nets[tag] = (Network(W, b), entry(f"gaps_{tag}", (X.shape[0],)))
    return X, nets, {tag: tuple(paper[tag]) for tag in TAGS}


def compute(samples=None):
    """Rows ``(arch, median, std, paper median, paper std, largest relative deviation from the record)``."""
    X, nets, paper = load_record()
    X = X if samples is None else X[:samples]
    rows = []
    for tag in TAGS:
        net, gaps = nets[tag]
        lam = spectrum(net, X, vectors=False, progress=False).lambda_min
        dev = float(np.max(np.abs(lam - gaps[:X.shape[0]]) / gaps[:X.shape[0]]))
        name = "[" + ",".join(map(str, net.dims)) + "]"
        rows.append((name, float(np.median(lam)), float(np.std(lam)), *paper[tag], dev))
    return rows


def tables(rows):
    """Markdown, LaTeX and CSV of :func:`compute`'s rows."""
    md = ["| Architecture | lambda_1 (median) | lambda_1 (std) | paper median | paper std | max rel. dev. from record |",
          "|---|---|---|---|---|---|"]
    tex = [r"\begin{tabular}{lcc}", r"\toprule", r"Architecture & $\lambda_1$ (median) & $\lambda_1$ (std) \\",
           r"\midrule"]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["architecture", "lambda1_median", "lambda1_std", "paper_median", "paper_std", "max_rel_dev"])
    for name, med, std, pm, ps, dev in rows:
        md.append(f"| `{name}` | {med:.4f} | {std:.4f} | {pm:.4f} | {ps:.4f} | {dev:.1e} |")
        tex.append(rf"  \texttt{{{name}}} & {med:.4f} & {std:.4f} \\")
        w.writerow([name, f"{med:.6g}", f"{std:.6g}", pm, ps, f"{dev:.3g}"])
    tex += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(md) + "\n", "\n".join(tex) + "\n", buf.getvalue()


def energy_figure(samples=None, seed=42):
    """Fiedler and ``lambda_max`` eigenvector energy by block for ``[2,30,1]`` and ``[2,12,8,6,1]``."""
    X, nets, _ = load_record()
    X = X if samples is None else X[:samples]
    cases = [([2, 30, 1], nets["1H"][0]), ([2, 12, 8, 6, 1], Network.random([2, 12, 8, 6, 1], seed=seed))]
    fig, axes = new_figure(2, len(cases), figsize=(5 * len(cases), 7), squeeze=False)
    for j, (dims, net) in enumerate(cases):
        res = spectrum(net, X, progress=False)
        for i, which in enumerate(("smallest", "largest")):
            ax = plot_block_energy(res, which, ax=axes[i, j])
            ax.set_title(f"{dims}: " + (r"Fiedler ($\lambda_1$)" if which == "smallest" else r"$\lambda_{\max}$"))
    fig.tight_layout()
    return fig
