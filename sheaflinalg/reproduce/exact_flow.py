"""Beyond the paper: the exact continuous-time heat flow, drawn from the flow itself.

The phase plane of ``[2,5,1]`` (He seed 10, input ``(0.2, 0.9)``, output pinned to
1.5, stalks seed 1) with its exact crossings and Filippov sliding segment, the
distance to the equilibrium with the certificate after the last event, and forward
Euler's first-order convergence to the exact flow on ``[2,30,1]`` (He seed 0, inputs
uniform in ``[-2, 2]^2`` seed 0): one three-panel figure (the README's ``docs/img/exact_flow.png``)
and the study's table.
"""

import numpy as np

from ..dynamics.study import convergence_study
from ..dynamics.heat import heat
from ..network.model import Network
from ..plotting.exact import plot_convergence_study, plot_exact_convergence, plot_exact_phase_plane
from ..plotting.figure import new_figure

STUDY_DTS = (0.04, 0.02, 0.01, 0.005, 0.0025)
STUDY_TIMES = (0.4, 1.2)


def draw_pinned_flow(ax_phase, ax_convergence):
    """The pinned ``[2,5,1]`` flow: phase plane (the sliding unit against another) and convergence."""
    net = Network.random([2, 5, 1], seed=10)
    ex = heat(net, [[0.2, 0.9]], method="exact", seed=1, pins={"yhat": 1.5})
    slid = ex.events[ex.events["kind"] == "sliding_start"]["neuron"]
    j = int(slid[0]) if len(slid) else 0
    other = ex.events[ex.events["neuron"] != j]["neuron"]
    k = int(other[0]) if len(other) else (j + 1) % 5
    plot_exact_phase_plane(ex, neurons=(j, k), ax=ax_phase, t_end=min(ex.time[0], 12.0))
    ax_phase.set_title("exact flow, output pinned to 1.5")
    plot_exact_convergence(ex, ax=ax_convergence)
    return ex


def euler_study(quick):
    """Euler against the exact flow on ``[2,30,1]``: 4 inputs and 5 step sizes (quick: 2 and 3)."""
    X = np.random.default_rng(0).uniform(-2, 2, size=(2 if quick else 4, 2))
    dts = STUDY_DTS[:3] if quick else STUDY_DTS
    return convergence_study(Network.random([2, 30, 1], seed=0), X, dts=dts, times=STUDY_TIMES)


def _study_tables(study):
    """Markdown, LaTeX and CSV of the study: error at each time, the largest, and its ratio to the next
    larger ``dt`` (2 at first order); the CSV adds the Euler steps to the last time."""
    worst = study.errors.max(axis=1)
    ratio = ["", *(f"{r:.3f}" for r in worst[:-1] / worst[1:])]
    n = study.exact.state.shape[0]
    md = (f"Forward Euler against the exact flow, `[2,30,1]`, {n} inputs, max over inputs of "
          f"max |Euler - exact| at fixed times.\n\n{study.table()}\n")
    cols = "c" * (len(study.times) + 1)
    tex = [rf"\begin{{tabular}}{{l{cols}}}", r"\toprule",
           "dt & " + " & ".join(f"$t = {t:g}$" for t in study.times) + r" & ratio \\", r"\midrule"]
    tex += [f"{dt:g} & " + " & ".join(f"{e:.3e}" for e in err) + f" & {q} \\\\"
            for dt, err, q in zip(study.dts, study.errors, ratio)]
    tex += [r"\bottomrule", r"\end{tabular}", f"% first-order slope {study.slope:.3f}"]
    csv = ["dt,euler_steps," + ",".join(f"error_t={t:g}" for t in study.times) + ",max_error,ratio_to_previous"]
    csv += [f"{dt:g},{round(max(study.times) / dt)}," + ",".join(f"{e:.6e}" for e in err) + f",{m:.6e},{q}"
            for dt, err, m, q in zip(study.dts, study.errors, worst, ratio)]
    return md, "\n".join(tex) + "\n", "\n".join(csv) + "\n"


def exact_flow(outputs, quick):
    """The exact phase plane, its convergence and Euler's convergence study (one figure), and the study's table."""
    fig, axes = new_figure(1, 3, figsize=(15, 4.4))
    ex = draw_pinned_flow(axes[0], axes[1])
    study = euler_study(quick)
    plot_convergence_study(study, ax=axes[2])
    fig.tight_layout()
    paths = outputs.figure(fig, "exact_flow")
    paths += outputs.table("exact_flow_euler_study", *_study_tables(study))
    kinds = ", ".join(f"{k} {v}" for k, v in ex.event_kind_counts().items() if v)
    return paths, (f"pinned [2,5,1]: {len(ex.events)} events ({kinds}); Euler vs exact on [2,30,1]: slope "
                   f"{study.slope:.2f}, error {study.errors[-1].max():.1e} at dt = {study.dts[-1]:g}")
