"""Ties at equilibrium (issues 31 and 33): CNNs on images with large zero areas.

Convolutions over a constant area give equal values, so most max-pool windows hold ties (equal positive
values, or zeros of dead ReLUs), and without biases most pre-activations are exactly 0.  At small nudging a
max-pool tie is decided by the forward pass's selection (the first maximum, backpropagation's) and a zero
pre-activation by the sign of the response: the samples settle, and the equilibrium gradient is torch's.
"""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.equilibrium_twin import check_equilibrium
import sheaflinalg as sl
from sheaflinalg.network.graph import Node
from sheaflinalg.network.graph.forward import evaluate
from sheaflinalg.training.equilibrium.graph import TIES_NUDGING, GraphEquilibrium
from sheaflinalg.training.velocity import GraphParameters

torch = pytest.importorskip("torch")

#: Strokes of five digit-like glyphs in the unit square: (x0, y0, x1, y1) segments.
GLYPHS = [[(0, 0, 0, 1), (0, 1, 1, 1), (1, 1, 1, 0), (1, 0, 0, 0)], [(0.5, 0, 0.5, 1)],
          [(0, 0, 1, 0), (1, 0, 0.3, 1)], [(0, 0, 0, 0.5), (0, 0.5, 1, 0.5), (0.7, 0, 0.7, 1)],
          [(0, 0, 1, 0), (1, 0, 1, 1), (0, 1, 1, 1), (0.2, 0.5, 1, 0.5)]]


def stroke_digits(rng, n, size=12):
    """``(X, Y)``: ``n`` glyphs drawn as one-pixel strokes of 1 on a black ``size x size`` background, one-hot."""
    X = np.zeros((n, 1, size, size))
    labels = rng.integers(0, len(GLYPHS), size=n)
    for i, label in enumerate(labels):
        (top, left), scale = rng.integers(1, 4, size=2), int(rng.integers(5, size - 4))
        for x0, y0, x1, y1 in GLYPHS[label]:
            t = np.linspace(0.0, 1.0, 3 * scale)
            rows = np.minimum((top + scale * (y0 + t * (y1 - y0))).astype(int), size - 1)
            cols = np.minimum((left + scale * (x0 + t * (x1 - x0))).astype(int), size - 1)
            X[i, 0, rows, cols] = 1.0
    return X, np.eye(len(GLYPHS))[labels]


def _cnn(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                               torch.nn.Flatten(), torch.nn.Linear(4 * 36, len(GLYPHS))).double()


def _tied_windows(graph, X):
    """Windows of the max-pool whose first maximum is tied with another entry at the forward pass."""
    pool = next(node for node in graph.nodes if node.op == "maxpool")
    forward = evaluate(graph, X)
    z = forward.values[pool.inputs[0]]
    best = np.take_along_axis(z, forward.pattern[pool.name], axis=1)
    # every 2x2 window of a (4, 12, 12) map: the entries at its four offsets
    maps = z.reshape(X.shape[0], 4, 6, 2, 6, 2)
    equal = (maps == best.reshape(X.shape[0], 4, 6, 1, 6, 1)).sum(axis=(3, 5))
    return int(np.sum(equal > 1))


@pytest.mark.parametrize("seed", [0, 1])
def test_ties_of_a_cnn_on_zero_backgrounds_settle_and_the_gradient_is_torchs(seed):
    model = _cnn(seed)
    net = sl.Network.from_torch(model, input_shape=(1, 12, 12)).replace(output="softmax")
    X, Y = stroke_digits(np.random.default_rng(seed), 30)
    graph = net.graph
    assert _tied_windows(graph, X.reshape(30, -1)) > 30 * 4 * 36 // 4       # the example is made of ties
    params = GraphParameters(graph)
    g = np.empty(params.size)
    report = GraphEquilibrium(graph, "cross_entropy").gradient(params.flat(), X.reshape(30, -1), Y, 1e-6, g)
    assert report.unsettled == 0
    model.zero_grad()
    torch.nn.functional.cross_entropy(model(torch.from_numpy(X)), torch.from_numpy(Y.argmax(axis=1))).backward()
    arrays = params.arrays(g)
    names = [node.name for node in graph.nodes if node.op in ("conv", "linear")]
    for name, layer in zip(names, (model[0], model[4])):
        for key in ("weight", "bias"):
            exact = getattr(layer, key).grad.numpy()
            np.testing.assert_allclose(arrays[name][key], exact, rtol=0, atol=1e-5 * (1.0 + np.abs(exact).max()))


def test_training_the_cnn_at_equilibrium_warns_of_no_unsettled_sample():
    net = sl.Network.from_torch(_cnn(0), input_shape=(1, 12, 12)).replace(output="softmax")
    X, Y = stroke_digits(np.random.default_rng(2), 60)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sl.UnsettledWarning)
        fit = sl.train(net, X, Y, method="equilibrium", epochs=2, batch_size=30, loss="cross_entropy", seed=0,
                       progress=False)
    assert fit.history.unsettled[1:] == [0, 0]


def test_the_cnns_equilibria_zero_the_dense_energys_gradient_with_the_ties_decided():
    net = sl.Network.from_torch(_cnn(3), input_shape=(1, 12, 12)).replace(output="softmax")
    X, Y = stroke_digits(np.random.default_rng(3), 3)
    eq = check_equilibrium(net, X.reshape(3, -1), Y, "cross_entropy", 1e-3)
    assert eq.settled.all()


# ---------------------------------------------------------------- pre-activations at exactly 0 (issue 33)
def _bias_free_cnn(seed, size=10):
    """Conv -> ReLU -> MaxPool -> Conv -> ReLU -> Linear without convolution biases: over the zero background
    both convolutions give exactly 0, a tie of every rectifier's two sides."""
    torch.manual_seed(seed)
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 2, 3, padding=1, bias=False), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(2, 2, 3, padding=1, bias=False), nn.ReLU(), nn.Flatten(),
                         nn.Linear(2 * (size // 2) ** 2, len(GLYPHS))).double()


def _forward_zeros(graph, X):
    """Per rectifier, the number of pre-activations at exactly 0 at the forward pass."""
    values = evaluate(graph, X).values
    return [int(np.sum(values[node.inputs[0]] == 0.0)) for node in graph.nodes if node.op == "relu"]


def test_exact_zeros_of_a_bias_free_cnn_are_decided_in_the_batch_and_the_gradient_is_torchs():
    model = _bias_free_cnn(0)
    graph = sl.Network.from_torch(model, input_shape=(1, 10, 10)).replace(output="softmax").graph
    X, Y = stroke_digits(np.random.default_rng(4), 20, size=10)
    first, second = _forward_zeros(graph, X.reshape(20, -1))
    assert first > 20 * 2 * 100 // 2 and second > 20                 # the example is made of zeros
    params = GraphParameters(graph)
    g = np.empty(params.size)
    report = GraphEquilibrium(graph, "cross_entropy").gradient(params.flat(), X.reshape(20, -1), Y, 1e-6, g)
    assert report.unsettled == 0 and report.sliding == 0 and report.iterations <= 6
    model.zero_grad()
    torch.nn.functional.cross_entropy(model(torch.from_numpy(X)), torch.from_numpy(Y.argmax(axis=1))).backward()
    arrays = params.arrays(g)
    names = [node.name for node in graph.nodes if node.op in ("conv", "linear")]
    for name, layer in zip(names, (model[0], model[3], model[6])):
        exact = layer.weight.grad.numpy()
        np.testing.assert_allclose(arrays[name]["weight"], exact, rtol=0, atol=1e-5 * (1.0 + np.abs(exact).max()))


@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**16), nudging=st.sampled_from([1e-6, 1e-4, -1e-4]))
def test_the_decided_zeros_are_one_sided_limits_of_the_dense_energy(seed, nudging):
    # every settled sample: the dense energy's gradient vanishes under the pattern solved under, a forward
    # zero left active has not moved down, one left inactive that moved up is pushed down with it active
    net = sl.Network.from_torch(_bias_free_cnn(seed), input_shape=(1, 10, 10)).replace(output="softmax")
    X, Y = stroke_digits(np.random.default_rng(seed), 1, size=10)
    eq = check_equilibrium(net, X.reshape(1, -1), Y, "cross_entropy", nudging)
    assert eq.settled.all()


def _sliding_graph():
    """x -> h -> relu -> z = h' - 2 -> relu -> out = h' - 3 relu(z): at x = (0.5, 1.5) the pre-activation z is
    exactly 0; pulling the output up moves z up with its ReLU inactive (through h) and down with it active
    (through the -3): both sides push into z = 0, a sliding mode."""
    nodes = [Node("h", "linear", ["x"], params={"weight": np.array([[1.0, 1.0]]), "bias": np.zeros(1)}),
             Node("hr", "relu", ["h"]),
             Node("z", "linear", ["hr"], params={"weight": np.array([[1.0]]), "bias": np.array([-2.0])}),
             Node("r", "relu", ["z"]), Node("c", "concat", ["hr", "r"], {"axis": 0}),
             Node("o", "linear", ["c"], params={"weight": np.array([[1.0, -3.0]]), "bias": np.zeros(1)})]
    return sl.Network.from_nodes((2,), nodes)


def test_a_sample_that_truly_slides_at_a_zero_is_reported_decided_or_held_never_unsettled():
    net = _sliding_graph()
    X, Y = np.array([[0.5, 1.5]]), np.array([[10.0]])
    small = check_equilibrium(net, X, Y, "mse", 1e-6)           # the dense twin checks both sides push in
    assert (small.report.unsettled, small.report.decided, small.report.sliding) == (0, 1, 0)
    assert not small.pattern["r"][0, 0] and small.values["z"][0, 0] > 0.0
    large = check_equilibrium(net, X, Y, "mse", 0.5)            # the Filippov search holds it at 0
    assert (large.report.unsettled, large.report.decided, large.sliding) == (0, 0, [[("z", 0)]])
    fit = sl.train(net, X, Y, method="equilibrium", epochs=1, batch_size=1, loss="mse", nudging=1e-6,
                   optimizer="sgd", lr=1e-3, progress=False)
    assert (fit.history.decided, fit.history.unsettled, fit.history.sliding) == ([None, 1], [None, 0], [None, 0])


def test_max_pool_ties_above_the_tie_nudging_are_unsettled():
    # the tied entries of a window move down together (a sliding mode of the selections) that the search does
    # not resolve: every sample is reported, the user's cue to lower the nudging
    net = sl.Network.from_torch(_cnn(0), input_shape=(1, 12, 12)).replace(output="softmax")
    X, Y = stroke_digits(np.random.default_rng(0), 4)
    graph = net.graph
    eq = GraphEquilibrium(graph, "cross_entropy", max_iter=6).settle(GraphParameters(graph).flat(),
                                                                   X.reshape(4, -1), Y, 10 * TIES_NUDGING)
    assert eq.report.unsettled == 4
