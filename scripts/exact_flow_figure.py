"""Draw docs/img/exact_flow.png: the exact flow's phase plane (with Filippov sliding), its convergence
with the certificate, and forward Euler's first-order convergence to it.

Run: ``.venv/bin/python scripts/exact_flow_figure.py [--out docs/img/exact_flow.png]``
"""

import argparse

import numpy as np

import sheaflinalg as sl
from sheaflinalg._common.atomic import save_figure
from sheaflinalg.plotting.exact import plot_convergence_study, plot_exact_convergence, plot_exact_phase_plane


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/img/exact_flow.png")
    args = parser.parse_args(argv)
    import matplotlib.pyplot as plt

    net = sl.Network.random([2, 5, 1], seed=10)
    ex = sl.heat(net, [[0.2, 0.9]], method="exact", seed=1, pins={"yhat": 1.5})
    slid = ex.events[ex.events["kind"] == "sliding_start"]["neuron"]
    j = int(slid[0]) if len(slid) else 0
    other = int(ex.events[ex.events["neuron"] != j]["neuron"][0]) if len(ex.events) else (j + 1) % 5
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    plot_exact_phase_plane(ex, neurons=(j, other), ax=axes[0], t_end=min(ex.time[0], 12.0))
    axes[0].set_title("exact flow, output pinned to 1.5")
    plot_exact_convergence(ex, ax=axes[1])
    X = np.random.default_rng(0).uniform(-2, 2, size=(4, 2))
    study = sl.convergence_study(sl.Network.random([2, 30, 1], seed=0), X, dts=(0.04, 0.02, 0.01, 0.005, 0.0025),
                                 times=(0.4, 1.2))
    plot_convergence_study(study, ax=axes[2])
    fig.tight_layout()
    save_figure(fig, args.out, dpi=80)
    print(study.table())


if __name__ == "__main__":
    main()
