"""Equilibria of smooth graph networks by the joint Gauss-Newton / fixed-point iteration (``equilibrium/smooth.py``).

Random graphs whose pattern nodes are all smooth (elementwise activations, normalisations, gates, softmax,
attention scores): the state settles at the dense energy's stationary point (the twin of
``helpers/equilibrium_twin.py``), is the pattern iteration's equilibrium, and ``g`` at a small nudging is
backprop's gradient; the forward pass with residuals is the naive one; a transformer block and a
squeeze-and-excitation block imported from torch get torch autograd's gradient.
"""

import numpy as np
import pytest

import sheaflinalg as sl
from helpers.equilibrium_twin import check_equilibrium, dense, loss_gradient
from helpers.naive_graph import forward as naive_forward
from helpers.random_graphs import EVERY_STEP, random_graph, random_inputs
from sheaflinalg.network.graph import forward as forward_module
from sheaflinalg.network.graph.forward import evaluate, node_steps
from sheaflinalg.training.backpropagation import descent_direction
from sheaflinalg.training.equilibrium import graph as graph_module
from sheaflinalg.training.equilibrium.graph import GraphEquilibrium
from sheaflinalg.training.equilibrium import loss_edge
from sheaflinalg.training.equilibrium.loss_edge import FIXED_POINT_STEPS
from sheaflinalg.sheaf.layout import Layout
from sheaflinalg.training.equilibrium.settings import BIAS_SHARE
from sheaflinalg.training.equilibrium.smooth import settled, settling_tolerance, takes_smooth_path
from sheaflinalg.training.velocity import GraphParameters

#: The random graphs' steps without piecewise-linear nodes (no rectifier, max-pool or clamp).
SMOOTH_STEPS = tuple(s for s in EVERY_STEP if s not in ("relu", "leaky_relu", "maxpool", "clamp", "window",
                                                         "residual", "concat"))


def smooth_graphs(count, output="softmax"):
    """The first ``count`` random graphs (seeds from 0) whose pattern nodes are all smooth, two or more."""
    found = []
    for seed in range(400):
        net = random_graph(seed, "mixed", output, max_layers=6, steps=SMOOTH_STEPS, axes=(1, 2))
        nodes = [net.graph.node(n) for n in net.graph.pattern_nodes]
        if len(nodes) >= 2 and all(node.rule.smooth for node in nodes):
            found.append((seed, net))
            if len(found) == count:
                return found
    raise AssertionError(f"fewer than {count} smooth random graphs")


GRAPHS = smooth_graphs(6)


def _batch(seed, net, M=4):
    rng = np.random.default_rng(seed)
    return random_inputs(net, seed, M).reshape(M, -1), np.eye(net.n_outputs)[rng.integers(0, net.n_outputs, size=M)]


def _backprops_residuals(net, X, Y, nudging):
    """Per sample, the edge residuals ``delta^{-T} u`` at the forward pass (``u = -b grad L`` on the output
    node): backpropagation's, from one sample's dense coboundary (free layout order)."""
    graph, lay = net.graph, Layout.from_graph(net.graph, reduced=True)
    rows = []
    for x, y in zip(X, Y):
        values, _ = naive_forward(graph, x)
        w = np.concatenate([values[node.name] for node in graph.nodes])
        delta, _, _ = dense(graph, lay, x, w)
        pull = np.zeros(lay.n_free)
        out = lay.free(graph.output_node)
        pull[out] = -nudging * loss_gradient(net.output, "cross_entropy", w[out], y)
        rows.append(np.linalg.solve(delta[:, lay.free_index].T, pull))
    return np.array(rows), lay


@pytest.mark.parametrize("seed, net, nudging, symmetric", [
    (seed, net, nudging, False) for seed, net in GRAPHS for nudging in (1e-6, 1e-4, -1e-3)] + [
    (seed, net, nudging, True) for seed, net in GRAPHS[:3] for nudging in (1e-4, -1e-3)])
def test_the_smooth_path_stops_within_its_declared_share_of_the_bias(seed, net, nudging, symmetric, monkeypatch):
    """The residuals the gradient reads (the nodes with parameters) are within BIAS_SHARE of the nudging's
    bias of the equilibrium's (solved to rounding by the pattern iteration, which the dense twin checks to
    be the energy's stationary point): one-sided, ``|e* - e_bp|`` (``e_bp`` backpropagation's residuals at
    the forward pass, from the dense coboundary); symmetric, its square relative to ``|e*|``."""
    graph = net.graph
    assert takes_smooth_path(graph, nudging)
    X, Y = _batch(seed, net)
    theta = GraphParameters(graph).flat()
    smooth = GraphEquilibrium(graph, "cross_entropy", symmetric=symmetric).settle(theta, X, Y, nudging)
    assert smooth.report.unsettled == 0 and smooth.report.iterations <= FIXED_POINT_STEPS
    monkeypatch.setattr(graph_module, "takes_smooth_path", lambda graph, nudging: False)
    monkeypatch.setattr(loss_edge, "BIAS_SHARE", 0.0)     # the frozen solves' fixed point to rounding
    exact = check_equilibrium(net, X, Y, "cross_entropy", nudging)
    backprop, lay = _backprops_residuals(net, X, Y, nudging)
    read = [node.name for node in graph.nodes if node.params]
    error, bias, size = (np.max([np.abs(a[name]).max(axis=1) for name in read], axis=0) for a in (
        {name: smooth.edges[name] - exact.edges[name] for name in read},
        {name: exact.edges[name] - backprop[:, lay.free(name)] for name in read}, exact.edges))
    share = bias * (bias / size if symmetric else 1.0)
    assert np.all(error <= 2.0 * BIAS_SHARE * share + 1e-11 * size)
    assert np.all(bias > 1e-4 * abs(nudging) * size)      # a bias to measure: the test can fail


@pytest.mark.parametrize("seed, net", GRAPHS[:3], ids=[str(s) for s, _ in GRAPHS[:3]])
def test_the_smooth_path_is_the_pattern_iterations_equilibrium(seed, net, monkeypatch):
    X, Y = _batch(seed, net)
    theta = GraphParameters(net.graph).flat()
    oracle = GraphEquilibrium(net.graph, "cross_entropy")
    smooth = oracle.settle(theta, X, Y, 1e-6)
    monkeypatch.setattr(graph_module, "takes_smooth_path", lambda graph, nudging: False)
    iterated = oracle.settle(theta, X, Y, 1e-6)
    for name, v in iterated.values.items():
        np.testing.assert_allclose(smooth.values[name], v, rtol=0, atol=1e-11 * (1.0 + np.abs(v).max()))
    for name, e in iterated.edges.items():      # the residuals are O(b): compared relative to the largest
        scale = max(np.abs(e).max() for e in iterated.edges.values())
        np.testing.assert_allclose(smooth.edges[name], e, rtol=0, atol=1e-6 * scale)
    assert smooth.report.iterations == 2


@pytest.mark.parametrize("seed, net", GRAPHS, ids=[str(s) for s, _ in GRAPHS])
def test_g_over_small_nudging_is_backprops_gradient(seed, net):
    X, Y = _batch(seed, net)
    params = GraphParameters(net.graph)
    g = np.empty(params.size)
    GraphEquilibrium(net.graph, "cross_entropy").gradient(params.flat(), X, Y, 1e-7, g)
    exact = -descent_direction(net.graph, X, Y, "cross_entropy", params=params)
    np.testing.assert_allclose(g, exact, rtol=0, atol=1e-5 * (1.0 + np.abs(exact).max()))


@pytest.mark.parametrize("seed, net", GRAPHS[:3], ids=[str(s) for s, _ in GRAPHS[:3]])
def test_the_forward_pass_with_residuals_is_the_naive_one(seed, net):
    X, _ = _batch(seed, net, M=3)
    graph = net.graph
    rng = np.random.default_rng(seed)
    r = {node.name: 0.1 * rng.normal(size=(3, graph.sizes[node.name])) for node in graph.nodes}
    state = evaluate(graph, X, residuals=r)
    for s in range(3):
        values, pattern = naive_forward(graph, X[s], residuals={name: v[s] for name, v in r.items()})
        for node in graph.nodes:
            np.testing.assert_allclose(state.values[node.name][s], values[node.name], rtol=1e-12, atol=1e-12)
        for name in graph.pattern_nodes:      # the linearisation points: the parents' values with their residuals
            np.testing.assert_allclose(state.pattern[name][s], pattern[name], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed, net", GRAPHS[:4], ids=[str(s) for s, _ in GRAPHS[:4]])
@pytest.mark.parametrize("blocks", [1, 3])
def test_the_forward_passs_tangents_are_those_of_its_pattern(seed, net, blocks, monkeypatch):
    if blocks > 1:      # every sample block makes its own linearisations (one for the batch, stacked)
        monkeypatch.setattr(forward_module, "sample_blocks", lambda graph, M: [0, 2, 4, 5][:blocks + 1])
    X, _ = _batch(seed, net, M=5)
    graph = net.graph
    state = evaluate(graph, X, tangents=True)
    plain = evaluate(graph, X)
    assert sorted(state.tangents) == sorted(graph.pattern_nodes)
    rng = np.random.default_rng(seed)
    for name in graph.pattern_nodes:
        node = graph.node(name)
        np.testing.assert_array_equal(state.pattern[name], plain.pattern[name])
        y = rng.normal(size=(5, graph.sizes[name]))
        whole = node.rule.linearise(node, graph, node.rule.split(node, graph, plain.pattern[name]))
        for i, parent in enumerate(node.inputs):
            x = rng.normal(size=(5, graph.sizes[parent]))
            for method, arg in (("apply", x), ("transpose", y)):
                np.testing.assert_array_equal(getattr(state.tangents[name], method)(i, arg),
                                              getattr(whole, method)(i, arg))
            for s in range(5):      # one sample's block, from the block of samples it is in
                one = node.rule.linearise(node, graph, node.rule.split(node, graph, plain.pattern[name][s:s + 1]))
                np.testing.assert_allclose(_dense(state.tangents[name].block(i, s)), _dense(one.block(i, 0)),
                                           rtol=1e-13, atol=1e-13)
    # the settling's passes: the steps made once, the batch as one block, residuals added (the same state)
    e = {name: rng.normal(size=v.shape) * 1e-3 for name, v in plain.values.items() if name != "x"}
    steps = node_steps(graph, tangents=True)
    for _ in range(2):
        again = evaluate(graph, X, residuals=e, tangents=True, steps=steps, whole=True)
        assert again.tangents.keys() == state.tangents.keys()
        for name, v in evaluate(graph, X, residuals=e).values.items():
            np.testing.assert_allclose(again.values[name], v, rtol=1e-14, atol=1e-15)
    with pytest.raises(ValueError, match="no frozen pattern"):
        evaluate(graph, X, pattern=plain.pattern, tangents=True)


def _dense(block):
    """A linearisation's block (1-D diagonal, dense or sparse) as a dense matrix."""
    block = block.toarray() if hasattr(block, "toarray") else np.asarray(block)
    return np.diag(block) if block.ndim == 1 else block


def test_the_contraction_bound_accepts_a_fast_step_and_not_a_slow_one():
    move, before = np.array([0.5, 3.0, 3.0, 3.0, 3.0]), np.array([9.0, 1e6, 4.0, 7.0, 2.0])
    # 0.5 <= 1; rate 3e-6: 3e-6 / (1 - 3e-6) * 3 <= 1; rate 0.75 > 1/2; rate 3/7: 0.75 * 3 > 1; growing
    assert settled(move, before, np.ones(5)).tolist() == [True, True, False, False, False]
    assert settled(move, None, np.ones(5)).tolist() == [True, False, False, False, False]
    assert not settled(move, before, np.full(5, 1e-6)).any()     # bounds 0.03 and 9e-6


def test_the_tolerance_is_a_share_of_the_bias_and_never_below_the_rounding():
    size, floor = np.array([1e-6, 1e-6, 1e-6]), np.array([0.0, 0.0, 1e-15])
    bias = np.array([1e-9, 1e-20, 1e-9])
    one = settling_tolerance(bias, size, floor)
    np.testing.assert_allclose(one, [BIAS_SHARE * 1e-9, 1e-18, BIAS_SHARE * 1e-9])
    both = settling_tolerance(bias, size, floor, symmetric=True)      # the bias of symmetric nudging: O(b^2)
    np.testing.assert_allclose(both, [BIAS_SHARE * 1e-12, 1e-18, BIAS_SHARE * 1e-12])
    np.testing.assert_allclose(settling_tolerance(None, size, floor), [1e-18, 1e-18, 1e-15 + 1e-18])


def test_graphs_with_pieces_or_at_large_nudging_take_the_pattern_iteration():
    relu = sl.Network.from_nodes((2,), [sl.Node("r", "relu", ["x"]), sl.Node("s", "sigmoid", ["r"])])
    gelu = sl.Network.from_nodes((2,), [sl.Node("g", "gelu", ["x"], {"approximate": "none"})])
    linear = sl.Network.from_nodes((2,), [sl.Node("fc", "linear", ["x"], params={"weight": np.eye(2),
                                                                                  "bias": np.zeros(2)})])
    assert not takes_smooth_path(relu.graph, 1e-6)
    assert takes_smooth_path(gelu.graph, 1e-6) and takes_smooth_path(gelu.graph, -1e-3)
    assert not takes_smooth_path(gelu.graph, 0.1)
    assert not takes_smooth_path(linear.graph, 1e-6)      # no pattern: one frozen solve does it


class _Block:
    """A pre-LN transformer block with 2-head attention and a GELU MLP, then an SE-gated SiLU conv (torch)."""

    @staticmethod
    def build():
        torch = pytest.importorskip("torch")
        from torch import nn
        import torch.nn.functional as F

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Conv1d(1, 8, 3, stride=3)
                self.ln = nn.LayerNorm(8, elementwise_affine=False)
                self.q, self.k, self.v = (nn.Linear(8, 8) for _ in range(3))
                self.fc = nn.Linear(8, 8)
                self.conv, self.squeeze, self.excite = nn.Conv1d(4, 6, 3, padding=1), nn.Conv1d(6, 2, 1), \
                    nn.Conv1d(2, 6, 1)
                self.head = nn.Linear(6, 3)

            def forward(self, x):
                h = self.embed(x).transpose(1, 2)                             # (N, 4, 8)
                y = self.ln(h)
                q, k, v = (f(y).reshape(-1, 4, 2, 4).transpose(1, 2) for f in (self.q, self.k, self.v))
                h = h + F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(-1, 4, 8)
                h = h + self.fc(F.gelu(h))
                c = F.silu(self.conv(h))                                        # (N, 6, 8)
                c = c * torch.sigmoid(self.excite(F.silu(self.squeeze(c.mean(dim=2, keepdim=True)))))
                return self.head(c.mean(dim=2))

        torch.manual_seed(0)
        return torch, Model().double()


def test_an_imported_transformer_and_se_block_get_torch_autograds_gradient():
    torch, model = _Block.build()
    net = sl.Network.from_torch(model, input_shape=(1, 12)).replace(output="softmax")
    assert takes_smooth_path(net.graph, 1e-8)
    rng = np.random.default_rng(0)
    X, labels = rng.normal(size=(5, 1, 12)), rng.integers(0, 3, size=5)
    params = GraphParameters(net.graph)
    g = np.empty(params.size)
    report = GraphEquilibrium(net.graph, "cross_entropy").gradient(params.flat(), X.reshape(5, -1), np.eye(3)[labels],
                                                                    1e-8, g)
    assert report.unsettled == 0 and report.iterations == 2
    model.zero_grad()
    torch.nn.functional.cross_entropy(model(torch.from_numpy(X)), torch.from_numpy(labels)).backward()
    arrays = params.arrays(g)
    for name, p in model.named_parameters():
        node, key = name.rsplit(".", 1)
        want = p.grad.numpy()
        np.testing.assert_allclose(arrays[node][key], want, rtol=0, atol=1e-6 * (1.0 + np.abs(want).max()))
