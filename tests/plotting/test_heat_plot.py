"""Heat-run figures (convergence dashboard, phase plane)."""

import numpy as np
import pytest

import sheaflinalg as sl
from sheaflinalg.plotting.heat import plot_convergence, plot_phase_plane


@pytest.fixture(scope="module")
def run():
    net = sl.Network.random([2, 6, 4, 4, 1], seed=0, output="sigmoid")
    X = np.random.default_rng(0).uniform(-2, 2, size=(2, 2))
    res = sl.heat(net, X, dt=0.01, max_steps=600, tol=0, seed=1, record_every=1, record_states=[1],
                  progress=False)
    return net, X, res


def test_convergence_dashboard(run, tmp_path):
    net, X, res = run
    path = tmp_path / "conv.png"
    fig = plot_convergence(res, forward=net.forward(X)[1], sample=1, path=path)
    assert path.stat().st_size > 1000
    ax_total, ax_type, ax_layer, ax_out = fig.axes
    np.testing.assert_allclose(ax_total.lines[0].get_ydata(), res.history.total)
    assert [l.get_label() for l in ax_type.lines] == ["weight", "activation", "output"]
    assert len(ax_layer.lines) == 4 + 1   # 3 hidden layers + the last weight layer, and the output edge
    np.testing.assert_allclose(ax_out.lines[0].get_ydata(), res.history.output[:, 1, 0])
    with pytest.raises(ValueError, match="record_every"):
        plot_convergence(sl.heat(net, X, max_steps=5, tol=0, progress=False))


def test_phase_plane_marks_every_crossing_of_the_two_neurons(run, tmp_path):
    net, X, res = run
    ax = plot_phase_plane(res, sample=1, layer=1, neurons=(0, 1), path=tmp_path / "pp.png")
    cr = res.crossings
    n = np.sum((cr[:, 1] == 1) & (cr[:, 2] == 1) & np.isin(cr[:, 3], [0, 1]))
    crosses = [c for c in ax.collections if c.get_label() == "boundary crossings"]
    assert (len(crosses[0].get_offsets()) if crosses else 0) == n
    with pytest.raises(ValueError, match="record_states"):
        plot_phase_plane(res, sample=0)
    with pytest.raises(ValueError, match="distinct"):
        plot_phase_plane(res, sample=1, neurons=(0, 0))
