"""Exact equilibria of graph networks (training/equilibrium/graph.py) against dense definitions and backprop.

Oracles: the dense coboundary of one sample under a pattern (tests/helpers/naive_graph.py): the energy
``1/2 ||delta c||^2 + b L(z)`` has a vanishing gradient on the free coordinates at the equilibrium,
whose pattern is the one read off it; for the mean squared error the minimiser is a dense linear solve.
As the nudging goes to 0, ``g`` approaches backprop's gradient (backward substitution, and torch
autograd on the MNIST-1D CNN), one-sided with a first-order error, symmetric with a second-order one.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.equilibrium_twin import check_equilibrium, dense
from helpers.naive_graph import coboundary
from helpers.random_graphs import graph_networks, random_graph, random_inputs
import sheaflinalg as sl
from sheaflinalg.network.graph import Node
from sheaflinalg.network.graph.forward import evaluate
from sheaflinalg.sheaf.layout import Layout
from sheaflinalg.training.equilibrium import graph as graph_module
from sheaflinalg.sheaf.matrix_free.residuals import GraphSheaf, StateResiduals
from sheaflinalg.training.equilibrium.graph import TIES_NUDGING, GraphEquilibrium
from sheaflinalg.training.backpropagation import descent_direction
from sheaflinalg.training.velocity import GraphParameters

#: (output, loss) pairs graph networks train with.
SETTINGS = [("identity", "mse"), ("softmax", "cross_entropy"), ("sigmoid", "cross_entropy"), ("tanh", "mse")]


def _targets(rng, output, loss, M, n):
    if output == "softmax":
        return np.eye(n)[rng.integers(0, n, size=M)]
    if loss == "cross_entropy":
        return rng.integers(0, 2, size=(M, n)).astype(float)
    return rng.normal(size=(M, n))


@settings(max_examples=20, deadline=None)
@given(setting=st.sampled_from(SETTINGS), nudging=st.sampled_from([1e-3, 0.1, 1.0, 3.0]), data=st.data())
def test_the_equilibrium_zeroes_the_dense_energys_gradient_under_the_pattern_it_reads(setting, nudging, data):
    output, loss = setting
    net, seed, mode = data.draw(graph_networks(outputs=(output,), max_layers=4))
    graph = net.graph
    rng = np.random.default_rng(seed)
    X = random_inputs(net, seed, 3, mode).reshape(3, -1)
    Y = _targets(rng, output, loss, 3, net.n_outputs)
    check_equilibrium(net, X, Y, loss, nudging)


@settings(max_examples=10, deadline=None)
@given(setting=st.sampled_from(SETTINGS), nudging=st.sampled_from([1e-6, -1e-3]), data=st.data())
def test_the_residuals_as_solved_leave_no_force_but_on_the_output_and_the_held_coordinates(setting, nudging, data):
    # the rest check of the tied path computes the output node's force only (GraphEquilibrium._at_rest): the
    # residuals are a backward substitution of seeds on the output and held coordinates, so the full force
    # under the pattern solved under vanishes everywhere else to rounding
    output, loss = setting
    net, seed, mode = data.draw(graph_networks(modes=("mixed", "dead", "ties"), outputs=(output,), max_layers=4))
    X = random_inputs(net, seed, 3, mode).reshape(3, -1)
    Y = _targets(np.random.default_rng(seed), output, loss, 3, net.n_outputs)
    eq = GraphEquilibrium(net.graph, loss).settle(GraphParameters(net.graph).flat(), X, Y, nudging)
    if not all(net.graph.node(name).op in ("relu", "leaky_relu", "maxpool") for name in net.graph.pattern_nodes):
        return                                      # other pattern kinds: the full check runs
    force = GraphSheaf(net.graph).force(StateResiduals(eq.edges, eq.pattern))
    tol = 1e-10 * (1.0 + max(np.abs(v).max() for v in eq.values.values()) + np.abs(X).max()) \
        * max(np.abs(e).max() for e in eq.edges.values())       # the rounding of residuals of the nudging's size
    for s, held in enumerate(eq.sliding):
        for u, j in held:
            force[u][s, j] = 0.0
    for node in net.graph.nodes:
        if node.name != net.graph.output_node:
            assert np.abs(force[node.name]).max() <= tol


@pytest.mark.parametrize("nudging", [1e-6, 0.5])
def test_a_coordinate_left_at_exactly_zero_by_the_dead_side_slides_and_the_sample_settles(nudging):
    # b3.conv has zero weights and bias: the solve leaves some of its coordinates at exactly 0 under the inactive
    # pattern, where z >= 0 reads them active with a force on them; they were reported unsettled
    net = random_graph(21418, "ties")
    X = random_inputs(net, 21418, 3, "ties").reshape(3, -1)
    Y = net.forward(X) + np.random.default_rng(21418).normal(0, 0.5, size=(3, net.n_outputs))
    eq = check_equilibrium(net, X, Y, "mse", nudging)
    # at small nudging they are ties of the forward pass (zero pre-activations), decided by the response's sign
    assert eq.settled.all() and all(bool(held) == (nudging > TIES_NUDGING) for held in eq.sliding)
    assert eq.report.sliding == sum(len(held) for held in eq.sliding)


@settings(max_examples=10, deadline=None)
@given(case=graph_networks(outputs=("identity",), max_layers=4), nudging=st.sampled_from([0.01, 1.0]))
def test_with_the_squared_error_the_equilibrium_is_the_dense_least_squares_solution(case, nudging):
    net, seed, mode = case
    graph = net.graph
    X = random_inputs(net, seed, 2, mode).reshape(2, -1)
    Y = np.random.default_rng(seed).normal(size=(2, net.n_outputs))
    eq = GraphEquilibrium(graph, "mse").settle(GraphParameters(graph).flat(), X, Y, nudging)
    lay = Layout.from_graph(graph, reduced=True)
    for s in np.flatnonzero(eq.settled & np.array([not held for held in eq.sliding])):
        w = np.concatenate([eq.values[node.name][s] for node in graph.nodes])
        delta, c, _ = dense(graph, lay, X[s], w)
        D, r = delta[:, lay.free_index], delta[:, lay.boundary_index] @ c[lay.boundary_index]
        E = np.zeros((lay.n_free, net.n_outputs))
        E[np.arange(lay.free(graph.output_node).start, lay.free(graph.output_node).stop), np.arange(net.n_outputs)] = 1
        exact = np.linalg.solve(D.T @ D + nudging * E @ E.T, -D.T @ r + nudging * E @ Y[s])
        np.testing.assert_allclose(w, exact, rtol=1e-9, atol=1e-9 * (1 + np.abs(exact).max()))


@settings(max_examples=12, deadline=None)
@given(setting=st.sampled_from(SETTINGS), nudging=st.sampled_from([1e-6, 1e-3, -1e-3]), data=st.data())
def test_fixed_point_and_gram_paths_give_the_same_equilibrium(setting, nudging, data):
    from sheaflinalg.training.equilibrium import loss_edge
    output, loss = setting
    net, seed, mode = data.draw(graph_networks(outputs=(output,), max_layers=4))
    X = random_inputs(net, seed, 3, mode).reshape(3, -1)
    Y = _targets(np.random.default_rng(seed), output, loss, 3, net.n_outputs)
    theta, oracle = GraphParameters(net.graph).flat(), GraphEquilibrium(net.graph, loss)
    with pytest.MonkeyPatch.context() as patch:     # the smooth path stops within its own tolerance (its tests)
        patch.setattr(graph_module, "takes_smooth_path", lambda graph, nudging: False)
        fast = oracle.settle(theta, X, Y, nudging)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(loss_edge, "FIXED_POINT_NUDGING", 0.0)      # every frozen solve through the Gram matrix
        gram = oracle.settle(theta, X, Y, nudging)
    assert fast.report.unsettled == gram.report.unsettled
    # the fixed point stops within its declared tolerance of the exact (Gram) solution, or at rounding
    tol = max(loss_edge.fixed_point_tolerance(nudging, 1), 1e-11)
    scale = 1e-300 + max(np.abs(e).max() for e in gram.edges.values())
    forward = evaluate(net.graph, X).values
    for name in fast.edges:
        assert np.abs(fast.edges[name] - gram.edges[name]).max() <= 10 * tol * scale
        move = np.abs(gram.values[name] - forward[name]).max()         # the nudging's displacement
        gap = np.abs(fast.values[name] - gram.values[name]).max()
        assert gap <= 1e-12 * (1 + np.abs(gram.values[name]).max()) + 10 * tol * move


@settings(max_examples=10, deadline=None)
@given(setting=st.sampled_from(SETTINGS), data=st.data())
def test_an_oracle_reusing_its_buffers_over_batches_gives_a_fresh_oracles_equilibria(setting, data):
    # the fixed point's blocks are kept by the oracle and the state comes from a kept buffer: a batch solved
    # after others (another batch size in between, a one-sample batch whose settlement is still held) is the
    # same bit for bit as with a fresh oracle, and a held settlement is never written by a later batch
    output, loss = setting
    net, seed, mode = data.draw(graph_networks(modes=("mixed", "dead", "ties"), outputs=(output,), max_layers=4))
    X = random_inputs(net, seed, 5, mode).reshape(5, -1)
    Y = _targets(np.random.default_rng(seed), output, loss, 5, net.n_outputs)
    theta, used = GraphParameters(net.graph).flat(), GraphEquilibrium(net.graph, loss)
    held = used.settle(theta, X[:1], Y[:1], 1e-6)
    kept = {name: v.copy() for name, v in held.values.items()}
    for rows in (slice(1, 4), slice(0, 5), slice(3, 4), slice(2, 5)):
        again, fresh = used.settle(theta, X[rows], Y[rows], 1e-6), GraphEquilibrium(net.graph, loss).settle(
            theta, X[rows], Y[rows], 1e-6)
        for name in fresh.values:
            np.testing.assert_array_equal(again.values[name], fresh.values[name])
        for name in fresh.edges:
            np.testing.assert_array_equal(again.edges[name], fresh.edges[name])
    for name, value in kept.items():
        np.testing.assert_array_equal(held.values[name], value)


def _backprop(graph, X, Y, loss):
    return -descent_direction(graph, X, Y, loss, params=GraphParameters(graph))


@settings(max_examples=12, deadline=None)
@given(setting=st.sampled_from(SETTINGS[:3]), data=st.data())
def test_g_over_small_nudging_is_backprops_gradient(setting, data):
    output, loss = setting
    net, seed, mode = data.draw(graph_networks(modes=("mixed", "active", "dead"), outputs=(output,), max_layers=4))
    rng = np.random.default_rng(seed)
    X = random_inputs(net, seed, 4, mode).reshape(4, -1)
    Y = _targets(rng, output, loss, 4, net.n_outputs)
    params = GraphParameters(net.graph)
    oracle, g = GraphEquilibrium(net.graph, loss), np.empty(params.size)
    for s in range(4):
        # a max-pool window of tied values (dead ReLUs) is a kink, decided at small nudging by the selection
        # solved under: the forward pass's first maximum, backprop's
        assert oracle.gradient(params.flat(), X[s:s + 1], Y[s:s + 1], 1e-8, g).unsettled == 0
        exact = _backprop(net.graph, X[s:s + 1], Y[s:s + 1], loss)
        np.testing.assert_allclose(g, exact, rtol=0, atol=1e-6 * (1.0 + np.abs(exact).max()))


def test_symmetric_nudging_has_a_second_order_error_and_one_sided_a_first_order_one():
    net = random_graph(11, "mixed", "softmax", max_layers=4)
    rng = np.random.default_rng(11)
    X = random_inputs(net, 11, 5).reshape(5, -1)
    Y = _targets(rng, "softmax", "cross_entropy", 5, net.n_outputs)
    params = GraphParameters(net.graph)
    oracle, theta = GraphEquilibrium(net.graph, "cross_entropy"), params.flat()
    exact = _backprop(net.graph, X, Y, "cross_entropy")

    def errors(b):
        plus, minus = np.empty(params.size), np.empty(params.size)
        assert oracle.gradient(theta, X, Y, b, plus).iterations == 1          # the pattern does not move
        assert oracle.gradient(theta, X, Y, -b, minus).iterations == 1
        return np.abs(plus - exact).max(), np.abs((plus + minus) / 2 - exact).max()

    (one, sym), (one_half, sym_half) = errors(2e-3), errors(1e-3)
    assert one / one_half == pytest.approx(2.0, rel=0.05)
    assert sym / sym_half == pytest.approx(4.0, rel=0.05)
    assert sym < one * 1e-2


def test_g_on_the_mnist1d_cnn_is_torch_autograds_gradient():
    torch = pytest.importorskip("torch")
    from helpers.torch_models import mnist1d_cnn

    model = mnist1d_cnn()
    net = sl.Network.from_torch(model, input_shape=(1, 40))
    graph = net.replace(output="softmax").graph
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 1, 40))
    Y = np.eye(10)[rng.integers(0, 10, size=6)]
    params = GraphParameters(graph)
    g = np.empty(params.size)
    GraphEquilibrium(graph, "cross_entropy").gradient(params.flat(), X.reshape(6, -1), Y, 1e-8, g)
    model.zero_grad()
    torch.nn.functional.cross_entropy(model(torch.from_numpy(X)), torch.from_numpy(Y.argmax(axis=1))).backward()
    arrays = params.arrays(g)
    for name, p in model.named_parameters():
        node, key = name.split(".")
        np.testing.assert_allclose(arrays[node][key], p.grad.numpy(), rtol=0,
                                   atol=1e-6 * (1.0 + np.abs(p.grad.numpy()).max()))


def _leaky_twin(mlp):
    """The MLP as a graph network: its ReLUs as LeakyReLU(0) (the same map, not a chain)."""
    nodes = [Node(n.name, "leaky_relu", n.inputs, {"negative_slope": 0.0}) if n.op == "relu" else n
             for n in mlp.graph.nodes]
    return sl.Network.from_nodes(mlp.input_shape, nodes, mlp.output)


@pytest.mark.parametrize("output, loss, nudging", [("identity", "mse", 1.0), ("softmax", "cross_entropy", 1e-3),
                                                   ("softmax", "cross_entropy", 1.0), ("sigmoid", "cross_entropy", -0.1)])
def test_a_linear_relu_graph_gives_the_chain_oracles_answer(output, loss, nudging):
    from sheaflinalg.training.equilibrium.chain import ChainEquilibrium

    mlp = sl.Network.random([3, 6, 5, 3], seed=2, output=output)
    twin = _leaky_twin(mlp)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(20, 3))
    Y = _targets(rng, output, loss, 20, 3)
    chain, graph = np.empty(mlp.n_parameters), np.empty(mlp.n_parameters)
    chain_report = ChainEquilibrium(mlp.dims, output, loss).gradient(mlp.parameters(), X, Y, nudging, chain)
    graph_report = GraphEquilibrium(twin.graph, loss).gradient(GraphParameters(twin.graph).flat(), X, Y, nudging,
                                                               graph)
    assert graph_report.unsettled == chain_report.unsettled == 0
    assert graph_report.sliding == chain_report.sliding
    assert graph_report.energy == pytest.approx(chain_report.energy, rel=1e-10)
    np.testing.assert_allclose(graph, chain, rtol=1e-9, atol=1e-12 * np.abs(chain).max())


def test_train_at_equilibrium_lowers_the_loss_of_a_cnn():
    pytest.importorskip("torch")
    from helpers.torch_models import mnist1d_cnn

    net = sl.Network.from_torch(mnist1d_cnn(), input_shape=(1, 40))
    net = net.replace(output="softmax")
    rng = np.random.default_rng(7)
    X, y = rng.normal(size=(16, 1, 40)), rng.integers(0, 10, size=16)
    fit = sl.train(net, X, y, method="equilibrium", epochs=3, batch_size=8, optimizer="adam", lr=1e-2,
                   seed=0, progress=False)
    assert fit.network.is_graph and fit.history.unsettled[1:] == [0, 0, 0]
    assert fit.history.train_loss[-1] < fit.history.train_loss[0]


def test_a_cycling_pattern_slides_on_the_switching_surface_with_filippovs_condition():
    net = _leaky_twin(sl.Network.random([2, 30, 1], seed=0))
    X, Y = sl.tasks.paraboloid(30, seed=0)
    graph = net.graph
    eq = GraphEquilibrium(graph, "mse").settle(GraphParameters(graph).flat(), X, Y, 1e3)   # close to pinned
    assert eq.settled.sum() >= 25 and any(eq.sliding)
    assert eq.report.sliding == sum(len(held) for held in eq.sliding)
    lay = Layout.from_graph(graph, reduced=True)
    for s in (s for s in range(30) if eq.sliding[s]):
        w = np.concatenate([eq.values[node.name][s] for node in graph.nodes])
        delta, c, pattern = dense(graph, lay, X[s], w)
        for u, j in eq.sliding[s]:
            k = lay.free(u).start + j
            above = -(delta[:, lay.free_index].T @ (delta @ c))[k]
            pattern["a1"] = pattern["a1"].copy()
            pattern["a1"][j] = False
            flipped, _, _ = coboundary(graph, lay, X[s], pattern, reduced=True)
            below = -(flipped[:, lay.free_index].T @ (flipped @ c))[k]
            assert below >= -1e-9 and above <= 1e-9           # both sides push into z = 0


@pytest.mark.parametrize("call, match", [
    (lambda o, t, X, Y, g: o.gradient(t[:-1], X, Y, 0.1, g), r"theta must be a finite vector of the graph's \d+"),
    (lambda o, t, X, Y, g: o.gradient(np.full_like(t, np.nan), X, Y, 0.1, g), "with NaN or Inf"),
    (lambda o, t, X, Y, g: o.gradient(t, X, Y, 0.0, g), "nudging must be finite and nonzero"),
    (lambda o, t, X, Y, g: o.gradient(t, X, Y, np.inf, g), "nudging must be finite and nonzero"),
    (lambda o, t, X, Y, g: o.gradient(t, X[:, :-1], Y, 0.1, g), r"X and Y must have shapes"),
    (lambda o, t, X, Y, g: o.gradient(t, X, Y, 0.1, g[:-1]), r"out must be a float64 array of shape"),
    (lambda o, t, X, Y, g: o.gradient(t, X[:0], Y[:0], 0.1, g), r"with M >= 1"),
    (lambda o, t, X, Y, g: o.gradient(t, np.full_like(X, np.nan), Y, 0.1, g), "must be finite"),
    (lambda o, t, X, Y, g: o.gradient(t, X, Y, "0.1", g), "nudging must be finite and nonzero"),
])
def test_bad_input_is_refused_before_any_work(call, match):
    net = random_graph(3, "mixed", "identity", max_layers=2)
    params = GraphParameters(net.graph)
    X = random_inputs(net, 3, 2).reshape(2, -1)
    with pytest.raises(ValueError, match=match):
        call(GraphEquilibrium(net.graph, "mse"), params.flat(), X, np.zeros((2, net.n_outputs)),
             np.empty(params.size))


def test_a_loss_graph_networks_do_not_train_with_is_refused():
    net = random_graph(3, "mixed", "identity", max_layers=2)
    with pytest.raises(sl.GraphNetworkError, match="l1, p-norm"):
        GraphEquilibrium(net.graph, "l1")
