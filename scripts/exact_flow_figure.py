"""Draw docs/img/exact_flow.png: the exact flow's phase plane (with Filippov sliding), its convergence
with the certificate, and forward Euler's first-order convergence to it.

Run: ``.venv/bin/python scripts/exact_flow_figure.py [--out docs/img/exact_flow.png]``
"""

import argparse

from sheaflinalg._common.atomic import save_figure
from sheaflinalg.plotting.exact import plot_convergence_study
from sheaflinalg.reproduce.exact_flow import draw_pinned_flow, euler_study


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/img/exact_flow.png")
    args = parser.parse_args(argv)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    draw_pinned_flow(axes[0], axes[1])
    study = euler_study(quick=False)
    plot_convergence_study(study, ax=axes[2])
    fig.tight_layout()
    save_figure(fig, args.out, dpi=80)
    print(study.table())


if __name__ == "__main__":
    main()
