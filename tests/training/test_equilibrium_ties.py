"""Max-pool ties at equilibrium (issue 31): a Conv -> ReLU -> MaxPool CNN on images with large zero areas.

Convolutions over a constant area give equal values, so most max-pool windows hold ties (equal positive
values, or zeros of dead ReLUs).  At small nudging a tie is decided by the forward pass's selection (the
first maximum, backpropagation's): the samples settle, and the equilibrium gradient is torch's.
"""

import warnings

import numpy as np
import pytest

from helpers.equilibrium_twin import check_equilibrium
import sheaflinalg as sl
from sheaflinalg.network.graph.forward import evaluate
from sheaflinalg.training.equilibrium.graph import GraphEquilibrium
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
