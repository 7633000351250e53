"""State-adaptive Euler steps on graph networks with state-dependent nodes (dynamics/euler/adaptive.py).

A layer norm's map has norm ``1/sigma`` at a state: huge where the variance of its input is tiny.  The
run reads the bound at every step's state and halves ``dt`` there; the oracle replays the run with the
naive dense force (tests/helpers/naive_graph.py) and checks every step's bound against ``lambda_max`` of
the naive dense ``delta^T delta`` at that state.
"""

import numpy as np
import pytest

from helpers.naive_graph import coboundary, dense_force, read_pattern
import sheaflinalg as sl
from sheaflinalg.sheaf.layout import Layout


def _ln_net(scale, seed=0):
    """x (6) -> linear (8, weights times ``scale``) -> layernorm -> GELU -> linear (3)."""
    rng = np.random.default_rng(seed)

    def linear(name, src, n, m, s=1.0):
        return sl.Node(name, "linear", [src], params={"weight": s * rng.normal(size=(m, n)) / np.sqrt(n),
                                                      "bias": s * 0.1 * rng.normal(size=m)})
    nodes = [linear("fc1", "x", 6, 8, scale), sl.Node("ln", "layernorm", ["fc1"], {"n_axes": 1, "eps": 1e-5}),
             sl.Node("g", "gelu", ["ln"], {"approximate": "none"}), linear("fc2", "g", 8, 3)]
    return sl.Network.from_nodes((6,), nodes)


def _start(net, X, spread):
    """The forward pass with the layer norm's input spread about its mean by ``spread`` (tiny: variance
    tiny; the layer norm's output is the same, its map's norm ``1/sigma`` grows by ``1/spread``)."""
    lay = Layout.from_graph(net.graph, reduced=True)
    S = sl.harmonic_extension(net, X).free[:, :lay.n_free].copy()
    v = S[:, lay.free("fc1")]
    S[:, lay.free("fc1")] = v.mean(axis=1, keepdims=True) + spread * (v - v.mean(axis=1, keepdims=True))
    return S


X = np.random.default_rng(1).normal(size=(3, 6))


def _energy(res):
    return res.history.discord.sum(axis=1)


def test_a_layer_norm_started_at_a_tiny_variance_converges_with_halved_steps():
    net = _ln_net(1.0)
    res = sl.heat(net, X, dt=0.3, init=_start(net, X, 1e-2), max_steps=8000, tol=1e-12, record_every=1,
                  reduced=True, progress=False)
    assert res.converged and res.dts.shape == (res.steps,) == res.state_bounds.shape
    assert res.state_bounds[0] > 1000 * res.state_bounds[-1]           # the bound at the start is huge
    assert res.dts[0] < 1e-4 and res.dts[-1] == 0.3 / 4                # halved 12 times, then twice
    np.testing.assert_array_equal(np.log2(0.3 / res.dts) % 1, 0)      # dt / 2^j, exactly
    assert np.all(0.5 * res.dts * res.state_bounds < 1.0) and np.all(res.dts * res.state_bounds >= 1.0)
    assert np.all(np.diff(_energy(res)) <= 0)
    np.testing.assert_allclose(res.output, net.forward(X), atol=1e-8)


def test_a_dt_stable_at_the_start_but_not_later_is_caught():
    """The layer norm's input starts spread out (``1/sigma`` small) and settles where it is narrow."""
    net = _ln_net(0.25)
    S0 = _start(net, X, 4.0)
    options = dict(dt=0.1, init=S0, max_steps=400, record_every=1, reduced=True, progress=False)
    with pytest.raises(ValueError, match=r"dt=0.1 is unstable for explicit Euler at the state of step [1-9]\d*: "
                                         r".*node\(s\) 'ln' \(layernorm, \|\|F\|\| <= .*adaptive=True"):
        sl.heat(net, X, adaptive=False, **options)
    res = sl.heat(net, X, **options)
    assert res.dts[0] == 0.1 and res.dts[-1] < 0.1 / 8 and np.all(np.diff(_energy(res)) <= 0)
    unchecked = sl.heat(net, X, check_stability=False, **options)    # the fixed step does go wrong
    assert unchecked.dts is None and np.any(np.diff(_energy(unchecked)) > 0)


def test_the_dense_oracle_agrees_step_by_step_and_every_bound_holds():
    net = _ln_net(1.0)
    lay = Layout.from_graph(net.graph, reduced=True)
    res = sl.heat(net, X, dt=0.3, init=_start(net, X, 3e-2), max_steps=60, tol=0.0, record_every=1,
                  record_states=[0, 1, 2], reduced=True, progress=False)
    states = res.history.states                                       # (records, samples, n_free)
    assert len(set(res.dts)) > 1
    for k, dt in enumerate(res.dts):
        np.testing.assert_allclose(states[k + 1], states[k] + dt * dense_force(net, lay, X, states[k], True),
                                   rtol=1e-11, atol=1e-12)
        for s in range(3):
            values = {"x": X[s], **{n.name: states[k, s, lay.free(n.name)] for n in net.graph.nodes}}
            delta = coboundary(net.graph, lay, X[s], read_pattern(net.graph, values), reduced=True)[0]
            D = delta[:, lay.free_index]
            assert np.linalg.eigvalsh(D.T @ D)[-1] <= res.state_bounds[k] * (1 + 1e-12)


def test_networks_with_global_bounds_keep_the_fixed_step():
    net = sl.Network.from_nodes((6,), [sl.Node("fc", "linear", ["x"], params={"weight": np.ones((4, 6)),
                                                                                "bias": np.zeros(4)}),
                                       sl.Node("t", "tanh", ["fc"])])
    res = sl.heat(net, X, dt=0.01, max_steps=5, seed=0, adaptive=True, progress=False)
    assert res.dts is None and res.state_bounds is None
    with pytest.raises(ValueError, match="dt=1 is unstable for explicit Euler: alpha"):
        sl.heat(net, X, dt=1.0, max_steps=5, seed=0, progress=False)


def test_adaptive_refusals():
    net = _ln_net(1.0)
    with pytest.raises(ValueError, match="adaptive=True halves an unstable dt, check_stability=False"):
        sl.heat(net, X, adaptive=True, check_stability=False, progress=False)
    with pytest.raises(TypeError, match="adaptive must be True or False"):
        sl.heat(net, X, adaptive="yes", progress=False)
    with pytest.raises(ValueError, match="heat.method='exact'. does not use adaptive"):
        sl.heat(sl.Network.random([6, 3, 1], seed=0), X, method="exact", adaptive=True)
