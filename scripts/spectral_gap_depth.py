"""Reproduce the spectral-gap-vs-depth table and the eigenvector-energy figure of appendix E.3.

Protocol (``shared/reference-protocols.md``): the paper's seed-42 He networks
``[2,30,1]``, ``[2,10,8,1]`` and ``[2,8,6,4,1]`` and its 50 paraboloid inputs,
replayed from ``data/spectral_gap_depth.npz``; ``lambda_1`` is the smallest
eigenvalue of the reduced ``L[Omega, Omega]`` (identity output) of each
input's activation pattern; median and standard deviation over the inputs.

Writes to ``--out`` (default ``results/spectral_gap_depth``):

* ``spectral_gap_depth.md``, ``.tex``, ``.csv``: the table, next to the paper's values and the
  largest relative deviation from the recorded ``lambda_1`` of every input;
* ``eigvec_energy.png``: the energy figure.

Usage: ``python scripts/spectral_gap_depth.py [--out DIR] [--samples 50]``.
"""

import argparse
import os
import sys

from sheaflinalg._common.atomic import save_figure, write_text
from sheaflinalg.reproduce.gap_depth import compute, energy_figure, tables


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="results/spectral_gap_depth", help="output directory")
    parser.add_argument("--samples", type=int, default=50, help="recorded inputs to use (default: all 50)")
    parser.add_argument("--no-figure", action="store_true", help="skip the energy figure")
    args = parser.parse_args(argv)
    if not 1 <= args.samples <= 50:
        parser.error("--samples must be between 1 and 50")
    rows = compute(args.samples)
    os.makedirs(args.out, exist_ok=True)
    md, tex, csv_text = tables(rows)
    for ext, text in (("md", md), ("tex", tex), ("csv", csv_text)):
        write_text(os.path.join(args.out, f"spectral_gap_depth.{ext}"), text)
    print(md)
    if not args.no_figure:
        path = os.path.join(args.out, "eigvec_energy.png")
        save_figure(energy_figure(args.samples), path, dpi=150, bbox_inches="tight")
        print(f"wrote {path}")
    decreasing = all(a[1] > b[1] for a, b in zip(rows, rows[1:]))
    print("lambda_1 decreases with depth:", "yes" if decreasing else "NO")
    return 0


if __name__ == "__main__":
    sys.exit(main())
