"""Section 6.1 and appendix E.1: the heat equation converges to the forward pass.

Protocol (``shared/reference-protocols.md``): ``alpha = 1``, ``dt = 0.01``,
random stalks, run until the largest change in a step is below ``1e-12``;
``[2,4,1]`` with identity output and ``[2,6,4,4,1]`` with sigmoid output.  The
input is ``(0.5, -1.0)``, the networks He-initialised with seed 0, the stalks
drawn with seed 1.
"""

import numpy as np

from ..dynamics.heat import heat
from ..network.model import Network
from ..plotting.figure import new_figure
from ..plotting.heat import plot_convergence, plot_phase_plane

X0 = np.array([[0.5, -1.0]])
PHASE_ARCHS = ([2, 4, 1], [2, 6, 4, 1], [2, 6, 4, 4, 1])


def _run(dims, output, record_every, record_states=None, max_steps=200_000):
    net = Network.random(dims, seed=0, output=output)
    res = heat(net, X0, alpha=1.0, dt=0.01, tol=1e-12, seed=1, max_steps=max_steps, record_every=record_every,
               record_states=record_states, progress=False)
    return net, res


def convergence(outputs, quick):
    """``fig:convergence`` ([2,4,1], identity) and ``fig:convergence-deep-sigmoid`` ([2,6,4,4,1], sigmoid)."""
    paths, notes = [], []
    for dims, output, stem in (([2, 4, 1], "identity", "convergence_2_4_1"),
                               ([2, 6, 4, 4, 1], "sigmoid", "convergence_2_6_4_4_1_sigmoid")):
        net, res = _run(dims, output, record_every=10)
        err = float(np.abs(res.output - net.forward(X0)).max())
        fig = plot_convergence(res, forward=net.forward(X0))
        fig.suptitle(f"{dims}, {output} output: {res.steps} Euler steps, |output - forward pass| = {err:.1e}")
        fig.tight_layout(rect=(0, 0, 1, 0.95))
        paths += outputs.figure(fig, stem)
        notes.append(f"{dims}: converged={res.converged} in {res.steps} steps, output error {err:.1e}")
    return paths, "; ".join(notes)


def phase_planes(outputs, quick):
    """``fig:phase-planes``: ``(z1[0], z1[1])`` trajectories with ReLU boundaries, crossings and the fixed point."""
    fig, axes = new_figure(1, len(PHASE_ARCHS), figsize=(5 * len(PHASE_ARCHS), 4.6))
    notes = []
    for ax, dims in zip(axes, PHASE_ARCHS):
        net, res = _run(dims, "identity", record_every=1, record_states=[0], max_steps=5_000 if quick else 20_000)
        plot_phase_plane(res, neurons=(0, 1), ax=ax)
        ax.set_title(f"{dims}: {res.crossings_total} crossings")
        notes.append(f"{dims}: {res.crossings_total} crossings")
    fig.tight_layout()
    return outputs.figure(fig, "phase_planes"), "; ".join(notes)
