"""Discord of graph networks: per-node residuals and the pinned equilibrium against dense definitions.

The naive twin builds one sample's dense ``delta`` from the definitions (tests/helpers/naive_graph.py) with the
pattern read off the state (``z >= 0`` active, the first maximum of each window): the residuals are
``-(delta c)`` of the full cochain ``c`` (state and boundary).  A chain whose ReLUs are LeakyReLUs of
slope 0 is a graph network equal to the chain: a second oracle for both functions.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.naive import phi, phi_jacobian
from helpers.naive_graph import coboundary, read_pattern
from helpers.random_graphs import graph_networks, random_graph, random_inputs
import sheaflinalg as sl
from sheaflinalg.network import activations
from sheaflinalg.network.graph import Graph, Node
from sheaflinalg.network.graph.chain import chain_graph
from sheaflinalg.sheaf.layout import Layout


def _naive_residuals(net, lay, x, w):
    """``({edge: residual}, pattern)`` of one sample's free cochain ``w`` from the dense coboundary."""
    graph = net.graph
    values = {"x": x, **{node.name: w[lay.free(node.name)] for node in graph.nodes}}
    pattern = read_pattern(graph, values)
    delta, c, _ = coboundary(graph, lay, x, pattern, reduced=True)
    for node in graph.nodes:
        c[lay.full(node.name)] = values[node.name]
    e = -(delta @ c)
    return {node.name: e[lay.edge(f"e_{node.name}")] for node in graph.nodes}, pattern


@settings(max_examples=15, deadline=None)
@given(case=graph_networks(outputs=("identity", "sigmoid")), at_forward=st.booleans())
def test_residuals_splits_and_channels_equal_the_dense_definitions(case, at_forward):
    net, seed, mode = case
    output = net.output
    graph = net.graph
    X = random_inputs(net, seed, 2, mode)
    lay = Layout.for_network(net)
    state = sl.harmonic_extension(net, X).free
    if not at_forward:
        state = state + np.random.default_rng(seed).normal(size=state.shape)
    res = sl.discord.residuals(net, X, state)
    assert res.edge_names == [node.name for node in graph.nodes] + ["yhat"]
    for s in range(2):
        edges, pattern = _naive_residuals(net, Layout.for_network(net, reduced=True), X[s].ravel(), state[s])
        for name, e in edges.items():
            np.testing.assert_allclose(res[name][s], e, rtol=1e-10, atol=1e-10)
            channels = e.reshape(graph.shapes[name][0], -1)
            np.testing.assert_allclose(res.by_channel(name)[s], 0.5 * (channels ** 2).sum(axis=1), rtol=1e-10,
                                       atol=1e-20)
        for name in graph.pattern_nodes:
            node = graph.node(name)
            if node.rule.smooth:        # a tangent has no pieces: no split
                with pytest.raises(ValueError, match="smooth"):
                    res.selected(name)
                continue
            if node.op == "maxpool":
                mask = np.zeros(graph.sizes[node.inputs[0]], dtype=bool)
                mask[pattern[name]] = True
            else:                       # a clamp selects its middle piece
                mask = pattern[name] == 0 if node.op == "clamp" else pattern[name]
            np.testing.assert_array_equal(res.selected(name)[s], mask)
            edge = node.inputs[0] if node.op == "maxpool" else name
            if edge != "x":
                split = res.split_discord(name)[s]
                np.testing.assert_allclose(split, [0.5 * np.sum(edges[edge][mask] ** 2),
                                                   0.5 * np.sum(edges[edge][~mask] ** 2)], rtol=1e-10, atol=1e-20)
    z = state[:, lay.free(graph.output_node)]
    np.testing.assert_allclose(res["yhat"], activations.apply(output, z) - state[:, lay.free("yhat")], atol=1e-12)
    np.testing.assert_allclose(res.by_edge().sum(axis=1), sum(res.by_node().values()), rtol=1e-12)
    if at_forward:
        assert np.abs(res.by_edge()).max() < 1e-20


def _leaky_twin(net):
    """The chain ``net`` as a graph network: every ReLU a LeakyReLU of slope 0 (the same function)."""
    graph = chain_graph(net.weights, net.biases, net.output)
    nodes = [Node(n.name, "leaky_relu", n.inputs, {"negative_slope": 0.0}) if n.op == "relu" else n
             for n in graph.nodes]
    twin = sl.Network.from_graph(Graph(graph.input_shape, nodes, net.output))
    assert twin.is_graph
    return twin


@pytest.mark.parametrize("output, seed, noise", [("identity", 3, 0.3), ("tanh", 1, 0.1)])
def test_a_chain_as_a_graph_network_has_the_chain_discord(output, seed, noise):
    net = sl.Network.random([3, 6, 5, 2], seed=seed, output=output)
    twin = _leaky_twin(net)
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(6, 3))
    Y = net.forward(X) + rng.normal(0, noise, size=(6, 2))
    if output == "tanh":
        Y = np.clip(Y, -0.9, 0.9)
    chain, graph = sl.discord.pinned(net, X, Y), sl.discord.pinned(twin, X, Y)
    np.testing.assert_array_equal(chain.settled, graph.settled)
    np.testing.assert_allclose(graph.state, chain.state, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(graph.by_edge, chain.by_edge, rtol=1e-8, atol=1e-14)
    assert [len(s) for s in graph.sliding] == [len(s) for s in chain.sliding]
    for l in (1, 2):
        for got, want in zip(graph.residuals.split(f"a{l}"), chain.residuals.split(f"R{l}")):
            np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-12)
        for got, want in zip(graph.residuals.split(f"a{l}", edge=f"z{l}"), chain.residuals.split(f"W{l}")):
            np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-12)


@settings(max_examples=12, deadline=None)
@given(case=graph_networks(outputs=activations.OUTPUTS))
def test_pinned_discord_is_zero_at_the_networks_own_output(case):
    net, seed, mode = case
    X = random_inputs(net, seed, 3, mode)
    pd = sl.discord.pinned(net, X, net.forward(X))
    assert pd.settled.all()
    assert np.abs(pd.by_edge).max() < 1e-20


def _gradient(graph, lay, x, w, flip=None, select=()):
    """Dense gradient of the discord on the free coordinates under the pattern read off ``w`` (``flip``: a
    ``(relu node, j)`` made inactive, or a list of them; ``select``: ``(max-pool node, window, entry)``
    selections), and the scale of its terms; a nonlinear output's edge ``1/2 ||phi(z) - yhat||^2`` included."""
    values = {"x": x, **{node.name: w[lay.free(node.name)] for node in graph.nodes}}
    pattern = read_pattern(graph, values)
    for name, j in [flip] if isinstance(flip, tuple) else flip or []:
        pattern[name] = pattern[name].copy()
        pattern[name][j] = False
    for name, window, entry in select:
        pattern[name][window] = entry
    red = Layout.from_graph(graph, reduced=True)
    delta, c, _ = coboundary(graph, red, x, pattern, reduced=True)
    for node in graph.nodes:
        c[red.full(node.name)] = values[node.name]
    gradient = delta[:, red.free_index].T @ (delta @ c)
    if not lay.reduced:         # the output edge pulls on the output node; yhat is pinned
        z = values[graph.output_node]
        gradient[red.free(graph.output_node)] += phi_jacobian(graph.output, z).T @ (
            phi(graph.output, z) - w[lay.free("yhat")])
        gradient = np.concatenate([gradient, np.zeros(z.size)])
    return gradient, 1.0 + np.abs(delta).max() * np.abs(c).max()


@settings(max_examples=15, deadline=None)
@given(case=graph_networks(outputs=activations.OUTPUTS), one_hot=st.booleans())
def test_the_pinned_equilibrium_zeroes_the_gradient_on_the_free_coordinates(case, one_hot):
    net, seed, mode = case
    X = random_inputs(net, seed, 3, mode).reshape(3, -1)
    rng = np.random.default_rng(seed)
    Y = net.forward(X) + rng.normal(0, 0.5, size=(3, net.n_outputs))
    if net.output != "identity":    # a nonlinear output is pinned inside its range, or to one-hot labels
        Y = np.eye(net.n_outputs)[rng.integers(0, net.n_outputs, size=3)] if one_hot else net.forward(X)[::-1]
    _check_pinned_equilibrium(net, X, Y)


def _check_pinned_equilibrium(net, X, Y, settled=False):
    """The pinned discord of ``(X, Y)`` (every sample ``settled`` if asked): the output at ``Y``, and on every
    settled sample a zero dense gradient on the free coordinates but the held ones (exactly 0, or two max-pool
    entries exactly equal), where both sides push into the surface."""
    graph = net.graph
    pd = sl.discord.pinned(net, X, Y)
    lay = pd.layout
    out = graph.output_node if net.output == "identity" else "yhat"
    assert lay.reduced == (net.output == "identity") and pd.edge_names[-1] == (out if lay.reduced else "yhat")
    np.testing.assert_array_equal(pd.state[:, lay.free(out)], Y)
    assert pd.settled.all() or not settled
    for s in np.flatnonzero(pd.settled):
        w = pd.state[s]
        gradient, scale = _gradient(graph, lay, X[s], w)
        held = np.zeros(lay.n_free, dtype=bool)
        held[lay.free(out)] = True
        for slide in pd.sliding[s]:
            if len(slide) == 3:
                held |= _check_tie(graph, lay, X[s], w, slide, gradient, scale)
                continue
            u, j = slide
            k = lay.free(u).start + j
            assert w[k] == 0.0          # held on the switching surface
            held[k] = True
            children = [node.name for node in graph.nodes if node.op in ("relu", "leaky_relu") and node.inputs[0] == u]
            below, _ = _gradient(graph, lay, X[s], w, flip=[(v, j) for v in children])
            assert below[k] <= 1e-9 * scale and gradient[k] >= -1e-9 * scale   # both sides push into z = 0
        assert np.abs(gradient[~held]).max() < 1e-9 * scale
    np.testing.assert_allclose(pd.by_edge, pd.residuals.by_edge())
    return pd


def _check_tie(graph, lay, x, w, tie, gradient, scale):
    """Two max-pool entries ``tie = (u, i, j)`` held equal: exactly equal, the gradient along ``u_i + u_j`` zero
    and, under either selection of their windows, the gradient along ``u_i - u_j`` pushing into ``u_i = u_j``;
    returns the mask of the two coordinates."""
    u, i, j = tie
    a, b = lay.free(u).start + i, lay.free(u).start + j
    assert w[a] == w[b]
    assert abs(gradient[a] + gradient[b]) < 1e-9 * scale
    windows = [(node.name, int(k)) for node in graph.nodes if node.op == "maxpool" and node.inputs[0] == u
               for k in np.flatnonzero(np.isin(read_pattern(graph, {"x": x, **{v.name: w[lay.free(v.name)]
                                                                               for v in graph.nodes}})[node.name],
                                                [i, j]))]
    side_i, _ = _gradient(graph, lay, x, w, select=[(name, k, i) for name, k in windows])
    side_j, _ = _gradient(graph, lay, x, w, select=[(name, k, j) for name, k in windows])
    assert side_i[a] - side_i[b] >= -1e-9 * scale and side_j[a] - side_j[b] <= 1e-9 * scale
    mask = np.zeros(lay.n_free, dtype=bool)
    mask[[a, b]] = True
    return mask


def test_a_coordinate_left_at_exactly_zero_by_the_dead_side_is_reported_sliding():
    # b3.conv has zero weights and bias: the pinned solve leaves some of its coordinates at exactly 0 under the
    # inactive pattern, where z >= 0 reads them active with a force on them (the dense gradient was 0.045)
    net = random_graph(21418, "ties")
    assert not np.any(net.graph.node("b3.conv").params["weight"])
    X = random_inputs(net, 21418, 3, "ties").reshape(3, -1)
    Y = net.forward(X) + np.random.default_rng(21418).normal(0, 0.5, size=(3, net.n_outputs))
    pd = _check_pinned_equilibrium(net, X, Y)
    assert pd.settled.all() and all(held for held in pd.sliding)
    assert {u for held in pd.sliding for u, _ in held} == {"b3.conv"}


def test_sliding_equilibria_are_the_chains_and_satisfy_filippovs_condition():
    net = sl.Network.random([2, 30, 1], seed=0)          # some of these samples slide (test_discord_pinned.py)
    X, Y = sl.tasks.paraboloid(30, seed=0)
    chain, pd = sl.discord.pinned(net, X, Y), sl.discord.pinned(_leaky_twin(net), X, Y)
    assert pd.settled.all() and any(pd.sliding)
    assert pd.sliding == [[(f"z{l}", j) for l, j in s] for s in chain.sliding]
    np.testing.assert_allclose(pd.state, chain.state, rtol=1e-9, atol=1e-9)
    graph, lay = pd.layout.graph, pd.layout
    for s in (s for s in range(30) if pd.sliding[s]):
        above, scale = _gradient(graph, lay, X[s], pd.state[s])
        for u, j in pd.sliding[s]:
            k = lay.free(u).start + j
            below, _ = _gradient(graph, lay, X[s], pd.state[s], flip=("a1", j))
            assert -below[k] >= -1e-9 * scale and -above[k] <= 1e-9 * scale   # both sides push into z = 0


def test_bad_labels_names_and_layouts_are_refused_clearly():
    net = random_graph(1, "mixed")
    X = random_inputs(net, 1, 2)
    with pytest.raises(ValueError, match=r"Y has shape \(2, 7\); expected \(2, \d\)"):
        sl.discord.pinned(net, X, np.zeros((2, 7)))
    res = sl.discord.residuals(net, X, sl.harmonic_extension(net, X).free)
    with pytest.raises(KeyError, match="did you mean 'head'"):
        res.by_channel("haed")
    with pytest.raises(ValueError, match="has no activation pattern"):
        res.split("head")
    other = Layout.for_network(random_graph(2, "mixed"))
    with pytest.raises(ValueError, match="not the layout of this graph network"):
        sl.discord.residuals(net, X, np.zeros((2, other.n_free)), layout=other)
    with pytest.raises(ValueError, match="state has shape"):
        sl.discord.residuals(net, X, np.zeros((2, 3)))


def test_the_discord_command_prints_a_node_table_of_a_graph_network_file(tmp_path, capsys):
    from sheaflinalg.cli import main

    net = random_graph(4, "mixed")
    X = random_inputs(net, 4, 5)
    path, data, figure = tmp_path / "g.npz", tmp_path / "d.npz", tmp_path / "d.png"
    net.save(str(path))
    np.savez(data, X_train=X[:1], Y_train=net.forward(X[:1]), X_test=X, Y_test=net.forward(X) + 0.1)
    status = main(["discord", "--network", str(path), "--data", str(data), "--samples", "3", "--plot", str(figure)])
    out = capsys.readouterr().out
    assert status == 0 and "3 inputs" in out and figure.exists()
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()[2:-3]}   # minus Total, footer, figure
    assert rows == {node.name: node.op for node in net.graph.nodes}
    assert main(["discord", "--network", str(path)]) == 2
    assert "give its inputs and labels with --data" in capsys.readouterr().err
    np.savez(data, X_train=X)
    assert main(["discord", "--network", str(path), "--data", str(data)]) == 2
    assert "Y_train" in capsys.readouterr().err


def test_the_figures_refuse_the_other_kind_of_network():
    from sheaflinalg.plotting.discord import plot_node_discord, plot_residuals

    net = random_graph(1, "mixed")
    X = random_inputs(net, 1, 2)
    graph_result = sl.discord.residuals(net, X, sl.harmonic_extension(net, X).free)
    with pytest.raises(TypeError, match="plot_node_discord"):
        plot_residuals(graph_result)
    chain = sl.Network.random([2, 3, 1], seed=0)
    with pytest.raises(TypeError, match="plot_residuals"):
        plot_node_discord(sl.discord.residuals(chain, [[0.0, 1.0]], np.zeros((1, 7))))


def test_the_damped_gauss_newton_iteration_reaches_a_stationary_point_where_full_steps_do_not(monkeypatch):
    # an attention + LayerNorm block pinned far from its output: the full Gauss-Newton steps (no halving)
    # oscillate; the damped steps decrease the pinned energy to a point where its dense gradient (the naive
    # twins' J^T r on the free coordinates) is small
    from helpers.graph_examples import attention_block
    from sheaflinalg.discord.pinning import graph
    from sheaflinalg.discord.pinning.graph import LineSearch
    monkeypatch.setattr(graph, "SECOND_ORDER", False)       # the Gauss-Newton iteration (Newton's: below)
    net = attention_block(3, 2, 2, seed=0)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, net.n_inputs))
    Y = net.forward(X) + rng.normal(size=(6, net.n_outputs))
    damped = sl.discord.pinned(net, X, Y, max_iter=100)
    monkeypatch.setattr(LineSearch, "HALVINGS", 0)
    full = sl.discord.pinned(net, X, Y, max_iter=100)
    assert damped.damped.sum() > 0 and full.damped.sum() == 0
    assert damped.settled.sum() >= full.settled.sum()
    free = np.ones(damped.layout.n_free, dtype=bool)
    free[damped.layout.free(net.graph.output_node)] = False

    def stationarity(pd, s):
        gradient, scale = _gradient(net.graph, pd.layout, X[s], pd.state[s])
        return np.abs(gradient[free]).max() / scale
    assert max(stationarity(full, s) for s in range(X.shape[0])) > 1e-2       # the full steps oscillate
    for s in range(X.shape[0]):
        assert stationarity(damped, s) < 1e-6
        assert damped.total[s] <= full.total[s] * (1 + 1e-12)


def test_a_softmax_cnn_pinned_to_one_hot_labels_settles_on_max_pool_sliding_modes():
    # the warm-up's CNN (convolution, ReLU, residual sum, max and average pooling, softmax): before max-pool
    # sliding modes were searched, 5 of these 6 samples were reported unsettled (their selections cycle)
    from sheaflinalg.commands.warmup import _graph_network
    net = _graph_network(sl)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(6, 8))
    Y = np.eye(3)[rng.integers(0, 3, size=6)]
    pd = _check_pinned_equilibrium(net, X, Y, settled=True)
    assert any(len(held) == 3 for slides in pd.sliding for held in slides)
    assert set(pd.outcome) <= {"settled", "decided", "sliding"} and "sliding" in pd.outcome
    assert "with no equilibrium found" in pd.table()


def test_an_equilibrium_on_a_surface_whose_read_off_side_is_at_rest_is_decided():
    # fc has zero weights and bias: pinned at its own output, every sample's fc is exactly 0 (four ReLU
    # surfaces each) and the forward pass is the equilibrium; a max-pool of equal entries ties its windows
    fc = Node("fc", "linear", ["x"], params={"weight": np.zeros((4, 2)), "bias": np.zeros(4)})
    pool = Node("pool", "maxpool", ["shape"], {"kernel_size": 2, "stride": 2, "padding": 0, "dilation": 1})
    head = Node("head", "linear", ["flat"], params={"weight": np.ones((1, 2)), "bias": np.zeros(1)})
    nodes = [fc, Node("r", "relu", ["fc"]), Node("shape", "reshape", ["r"], {"shape": (1, 4)}), pool,
             Node("flat", "reshape", ["pool"], {"shape": (2,)}), head]
    net = sl.Network.from_nodes((2,), nodes)
    X = np.random.default_rng(0).normal(size=(3, 2))
    pd = sl.discord.pinned(net, X, net.forward(X))
    assert pd.outcome.tolist() == ["decided"] * 3 and pd.settled.all()
    np.testing.assert_array_equal(pd.ties, [4 + 2] * 3)        # four zeros, two windows of equal entries
    assert "0 settled, 3 decided at a tie or zero, 0 sliding (Filippov), 0 with no equilibrium found" in pd.table()
    Y = net.forward(X) + 1.0
    moved = sl.discord.pinned(net, X, Y)
    assert (moved.outcome != "unsettled").all()
