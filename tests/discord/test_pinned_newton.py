"""Newton steps of the pinned discord on smooth graph networks against a dense nonlinear least-squares solve.

The oracle is scipy's ``least_squares`` on the residuals of the naive dense twin (tests/helpers/naive_graph.py:
every node's dense map at its parents' values, the affine tangent, evaluated there), the output held at the
pin and every other node's value free, started at the forward pass.
"""

import numpy as np
import pytest

from helpers.graph_examples import attention_block
from helpers.naive_graph import coboundary, read_pattern
import sheaflinalg as sl
from sheaflinalg.discord.pinning import graph as pinning
from sheaflinalg.discord.pinning.newton import GaussNewtonInverse, PinnedNewton
from sheaflinalg.network.graph.forward import evaluate
from sheaflinalg.sheaf.layout import Layout
from sheaflinalg.sheaf.matrix_free.coboundary import GraphCoboundary
from sheaflinalg.sheaf.matrix_free.residuals import GraphSheaf

optimize = pytest.importorskip("scipy.optimize")


def _linear(name, src, n_out, n_in, rng):
    return sl.Node(name, "linear", [src], params={"weight": rng.normal(size=(n_out, n_in)),
                                                 "bias": 0.3 * rng.normal(size=n_out)})


def _smooth_chain(seed):
    """linear - GELU - linear - tanh, a SiLU gate multiplied in, LayerNorm, linear: identity output (3 -> 2)."""
    rng = np.random.default_rng(seed)
    nodes = [_linear("a", "x", 4, 3, rng), sl.Node("g", "gelu", ["a"], {"approximate": "none"}),
             _linear("b", "g", 4, 4, rng), sl.Node("t", "tanh", ["b"]), sl.Node("s", "silu", ["a"]),
             sl.Node("m", "mul", ["t", "s"]), sl.Node("n", "layernorm", ["m"], {"n_axes": 1, "eps": 1e-5}),
             _linear("out", "n", 2, 4, rng)]
    return sl.Network.from_nodes((3,), nodes)


NETWORKS = {"chain": lambda: _smooth_chain(0), "attention": lambda: attention_block(2, 2, 1, seed=1)}


def _dense_residuals(net, lay, x, w):
    """``(r, J)``: all residuals ``x_v - f_v(parents)`` of one sample's free cochain ``w`` from the naive dense
    twin, and their Jacobian (its ``delta`` at the state, on the free coordinates)."""
    graph = net.graph
    values = {"x": x, **{node.name: w[lay.free(node.name)] for node in graph.nodes}}
    delta, c, _ = coboundary(graph, lay, x, read_pattern(graph, values), reduced=True)
    for node in graph.nodes:
        c[lay.full(node.name)] = values[node.name]
    return -(delta @ c), -delta[:, lay.free_index]


def _oracle(net, lay, x, y):
    """The dense least-squares minimiser (free cochain) of one sample pinned to ``y``, from the forward pass."""
    out = lay.free(net.graph.output_node)
    values = evaluate(net.graph, x[None]).values
    start = np.concatenate([values[node.name][0] for node in net.graph.nodes])
    free = np.ones(lay.n_free, dtype=bool)
    free[out] = False

    def full(v):
        w = np.empty(lay.n_free)
        w[free], w[out] = v, y
        return w
    fit = optimize.least_squares(lambda v: _dense_residuals(net, lay, x, full(v))[0], start[free],
                                 jac=lambda v: _dense_residuals(net, lay, x, full(v))[1][:, free], method="lm",
                                 xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=20000)
    return full(fit.x)


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_newton_reaches_the_dense_least_squares_minimum_of_pins_far_from_the_output(name):
    net = NETWORKS[name]()
    rng = np.random.default_rng(5)
    X = rng.normal(size=(2, net.n_inputs))
    Y = net.forward(X) + 3.0 * rng.normal(size=(2, net.n_outputs))       # far: residuals of order 1
    pd = sl.discord.pinned(net, X, Y, progress=False)
    assert pd.outcome.tolist() == ["settled"] * 2
    for s in range(2):
        want = _oracle(net, pd.layout, X[s], Y[s])
        r_want = _dense_residuals(net, pd.layout, X[s], want)[0]
        r_got = _dense_residuals(net, pd.layout, X[s], pd.state[s])[0]
        assert 0.5 * r_got @ r_got == pytest.approx(pd.total[s], rel=1e-12)
        assert pd.total[s] == pytest.approx(0.5 * r_want @ r_want, rel=1e-9) and pd.total[s] > 1e-3
        np.testing.assert_allclose(pd.state[s], want, rtol=1e-6, atol=1e-6)


def test_newton_settles_where_the_gauss_newton_iteration_has_not_come_to_rest(monkeypatch):
    net = attention_block(2, 2, 1, seed=1)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, net.n_inputs))
    Y = net.forward(X) + 4.0 * rng.normal(size=(8, net.n_outputs))
    newton = sl.discord.pinned(net, X, Y, max_iter=15, progress=False)
    monkeypatch.setattr(pinning, "SECOND_ORDER", False)
    gauss_newton = sl.discord.pinned(net, X, Y, max_iter=15, progress=False)
    assert newton.settled.all() and not gauss_newton.settled.all()
    both = gauss_newton.settled
    np.testing.assert_allclose(newton.total[both], gauss_newton.total[both], rtol=1e-8)


def _dense_gauss_newton(net, lay, x, held):
    """The dense constrained Gauss-Newton inverse ``Z (Z^T delta^T delta Z)^-1 Z^T`` (``Z``: the free coordinates
    that are not held) at the forward state of one sample."""
    values = {"x": x, **{k: v[0] for k, v in evaluate(net.graph, x[None]).values.items()}}
    delta, _, _ = coboundary(net.graph, lay, x, read_pattern(net.graph, values), reduced=True)
    delta = delta[:, lay.free_index]
    keep = np.setdiff1d(np.arange(lay.n_free), held)
    P = np.zeros((lay.n_free, lay.n_free))
    P[np.ix_(keep, keep)] = np.linalg.inv(delta[:, keep].T @ delta[:, keep])
    return P, delta


def test_the_preconditioner_and_the_hessian_products_are_the_dense_ones_at_the_forward_state():
    net = _smooth_chain(1)
    lay = Layout.from_graph(net.graph, reduced=True)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(2, 3))
    held = np.arange(lay.free(net.graph.output_node).start, lay.n_free)
    forward = evaluate(net.graph, X)
    op = GraphCoboundary(net.graph, forward.pattern, layout=lay)
    P = GaussNewtonInverse(op, held, 2)
    r = rng.normal(size=(2, lay.n_free))
    state = np.concatenate([forward.values[node.name] for node in net.graph.nodes], axis=1)
    sheaf = GraphSheaf(net.graph)

    def gradient(x, w):
        _, force = pinning._pinned_forces(sheaf, x, w, lay)(pinning.node_values(net.graph, lay, w))
        return -np.concatenate([force[node.name] for node in net.graph.nodes], axis=1)
    newton = PinnedNewton(sheaf, lay, held, gradient, None, None)
    Hr = newton.hessian_product(X, state, P(r))          # zero residuals: H = delta^T delta (Gauss-Newton)
    for s in range(2):
        dense, delta = _dense_gauss_newton(net, lay, X[s], held)
        np.testing.assert_allclose(P(r)[s], dense @ r[s], rtol=1e-9, atol=1e-12)
        want = delta.T @ delta @ (dense @ r[s])
        want[held] = 0.0
        np.testing.assert_allclose(Hr[s], want, rtol=1e-6, atol=1e-8)


def test_a_pin_at_the_networks_own_output_rests_at_once_and_max_iter_is_checked():
    net = _smooth_chain(2)
    X = np.random.default_rng(3).normal(size=(2, 3))
    Y = net.forward(X)
    Y[1] += 2.0                                             # one sample at its own output, one far from it
    pd = sl.discord.pinned(net, X, Y, max_iter=1, progress=False)
    assert pd.outcome.tolist() == ["settled", "unsettled"] and pd.total[0] < 1e-25
    assert sl.discord.pinned(net, X, Y, progress=False).settled.all()
    with pytest.raises(ValueError, match="max_iter"):
        sl.discord.pinned(net, X, Y, max_iter=0)
