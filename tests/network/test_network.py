"""Network: construction, forward pass, I/O without pickle, importers, bad input."""

import warnings

import numpy as np
import pytest

from helpers.naive import forward
import sheaflinalg as sl


def test_random_is_he_initialised_and_seeded():
    net = sl.Network.random([400, 300, 1], seed=5)
    W = net.weights[0]
    assert abs(W.std() - np.sqrt(2 / 400)) < 0.01 * np.sqrt(2 / 400) * 10
    assert all(np.all(b == 0) for b in net.biases)
    np.testing.assert_array_equal(sl.Network.random([400, 300, 1], seed=5).weights[0], W)
    assert not np.array_equal(sl.Network.random([400, 300, 1], seed=6).weights[0], W)


@pytest.mark.parametrize("output", ["identity", "sigmoid", "tanh", "softmax"])
def test_forward_matches_naive_and_handles_1d(output, rng):
    net = sl.Network.random([3, 7, 5, 2], seed=1, output=output)
    X = rng.normal(size=(6, 3))
    Y = net.forward(X)
    assert Y.shape == (6, 2)
    for s in range(6):
        np.testing.assert_allclose(Y[s], forward(net.weights, net.biases, output, X[s])[2], rtol=1e-13)
    np.testing.assert_allclose(net.forward(X[0]), Y[0], rtol=1e-14)
    assert [p.shape for p in net.activation_pattern(X)] == [(6, 7), (6, 5)]
    assert [p.shape for p in net.activation_pattern(X[0])] == [(7,), (5,)]


def test_integer_and_float32_inputs_are_converted(rng):
    net = sl.Network.random([2, 4, 1], seed=0)
    Xi = np.array([[1, 2], [-1, 0]])
    np.testing.assert_array_equal(net.forward(Xi), net.forward(Xi.astype(np.float64)))
    X32 = rng.normal(size=(3, 2)).astype(np.float32)
    np.testing.assert_array_equal(net.forward(X32), net.forward(X32.astype(np.float64)))
    W32 = [w.astype(np.float32) for w in net.weights]
    assert sl.Network(W32, net.biases).weights[0].dtype == np.float64


def test_save_load_roundtrip(tmp_path):
    net = sl.Network.random([3, 5, 4, 2], seed=2, output="softmax")
    path = tmp_path / "net.npz"
    net.save(path)
    back = sl.Network.load(path)
    assert back.output == "softmax" and back.dims == net.dims
    for a, b in zip(back.weights + back.biases, net.weights + net.biases):
        np.testing.assert_array_equal(a, b)
    assert [p.name for p in tmp_path.iterdir()] == ["net.npz"]  # no temporary left behind
    np.testing.assert_array_equal(sl.Network.from_parameters(net.parameters(), net.dims, "softmax").weights[1],
                                  net.weights[1])


def test_corrupt_truncated_and_pickled_files_are_refused(tmp_path):
    net = sl.Network.random([2, 3, 1], seed=0)
    good = tmp_path / "good.npz"
    net.save(good)
    data = good.read_bytes()
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="corrupt or truncated"):
        sl.Network.load(truncated)
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"this is not a zip file at all" * 10)
    with pytest.raises(ValueError, match="corrupt or truncated"):
        sl.Network.load(garbage)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, W1=np.array([{"evil": 1}], dtype=object), b1=np.zeros(1))
    with pytest.raises(ValueError, match="pickle"):
        sl.Network.load(pickled)
    other = tmp_path / "other.npz"
    np.savez(other, A=np.zeros(3))
    with pytest.raises(ValueError, match="not a sheaflinalg network"):
        sl.Network.load(other)
    nobias = tmp_path / "nobias.npz"
    np.savez(nobias, W1=np.zeros((1, 2)))
    with pytest.raises(ValueError, match="missing bias"):
        sl.Network.load(nobias)


def test_bad_networks_are_refused():
    W = np.ones((3, 2))
    with pytest.raises(ValueError, match="NaN or Inf"):
        sl.Network([np.array([[np.nan, 1.0]])], [np.zeros(1)])
    with pytest.raises(ValueError, match="NaN or Inf"):
        sl.Network([W], [np.array([0.0, np.inf, 0.0])])
    with pytest.raises(ValueError, match="takes 4 inputs but layer 1 has 3"):
        sl.Network([W, np.ones((1, 4))], [np.zeros(3), np.zeros(1)])
    with pytest.raises(ValueError, match="empty layer"):
        sl.Network([np.ones((0, 2))], [np.zeros(0)])
    with pytest.raises(ValueError, match="unknown output activation 'relu'"):
        sl.Network([W], [np.zeros(3)], output="relu")
    with pytest.raises(ValueError, match="b1 must have shape"):
        sl.Network([W], [np.zeros(2)])
    with pytest.raises(ValueError, match="at least one layer"):
        sl.Network([], [])
    with pytest.raises(TypeError, match="complex"):
        sl.Network([W.astype(complex)], [np.zeros(3)])
    with pytest.raises(ValueError, match="every layer needs at least one neuron"):
        sl.Network.random([2, 0, 1])


def test_bad_data_is_refused():
    net = sl.Network.random([2, 3, 1], seed=0)
    with pytest.raises(ValueError, match="NaN or Inf"):
        net.forward(np.array([[0.0, np.nan]]))
    with pytest.raises(ValueError, match="3 features per sample but the network takes 2"):
        net.forward(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="empty"):
        net.forward(np.zeros((0, 2)))
    with pytest.raises(ValueError, match="1-D .* or 2-D"):
        net.forward(np.zeros((1, 2, 2)))
    with pytest.raises(TypeError, match="numeric"):
        net.forward(np.array([["a", "b"]]))
    with pytest.raises(ValueError, match="NaN or Inf"):
        sl.verify(net, np.array([[np.inf, 0.0]]))
    with pytest.raises(ValueError, match="features"):
        sl.assemble(net, np.zeros(5))


# ------------------------------------------------------------------ importers
sklearn = pytest.importorskip("sklearn")


def _fit(model, X, y):
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y)


def test_from_sklearn_regressor_on_diabetes():
    from sklearn.datasets import load_diabetes
    from sklearn.neural_network import MLPRegressor

    X, y = load_diabetes(return_X_y=True)
    model = _fit(MLPRegressor(hidden_layer_sizes=(16, 8), max_iter=200, random_state=0), X, y)
    net = sl.Network.from_sklearn(model)
    assert net.dims == [10, 16, 8, 1] and net.output == "identity"
    pred = model.predict(X)
    np.testing.assert_allclose(net.forward(X)[:, 0], pred, rtol=1e-12, atol=1e-12 * np.abs(pred).max())


def test_from_sklearn_classifiers_on_digits():
    from sklearn.datasets import load_digits
    from sklearn.neural_network import MLPClassifier

    X, y = load_digits(return_X_y=True)
    multi = _fit(MLPClassifier(hidden_layer_sizes=(32,), max_iter=50, random_state=0), X, y)
    net = sl.Network.from_sklearn(multi)
    assert net.output == "softmax"
    np.testing.assert_allclose(net.forward(X), multi.predict_proba(X), rtol=1e-12, atol=1e-12)
    binary = _fit(MLPClassifier(hidden_layer_sizes=(8, 8), max_iter=50, random_state=0), X, y % 2)
    net2 = sl.Network.from_sklearn(binary)
    assert net2.output == "sigmoid" and net2.dims[-1] == 1
    np.testing.assert_allclose(net2.forward(X)[:, 0], binary.predict_proba(X)[:, 1], rtol=1e-12, atol=1e-12)


def test_unsupported_sklearn_models_are_refused():
    from sklearn.linear_model import LinearRegression
    from sklearn.neural_network import MLPRegressor

    X = np.random.default_rng(0).normal(size=(20, 3))
    y = X.sum(axis=1)
    with pytest.raises(ValueError, match="relu"):
        sl.Network.from_sklearn(_fit(MLPRegressor(hidden_layer_sizes=(4,), activation="tanh", max_iter=20), X, y))
    with pytest.raises(ValueError, match="not fitted"):
        sl.Network.from_sklearn(MLPRegressor())
    with pytest.raises(TypeError, match="MLPRegressor or MLPClassifier"):
        sl.Network.from_sklearn(LinearRegression().fit(X, y))


def test_from_torch_matches_torch():
    torch = pytest.importorskip("torch")
    from torch import nn

    torch.manual_seed(0)
    X = np.random.default_rng(0).normal(size=(50, 4))
    cases = [
        (nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3)), "identity"),
        (nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3), nn.Softmax(dim=-1)), "softmax"),
        (nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 1), nn.Sigmoid()), "sigmoid"),
        (nn.Sequential(nn.Linear(4, 5, bias=False), nn.ReLU(), nn.Linear(5, 2), nn.Tanh()), "tanh"),
    ]
    for model, output in cases:
        net = sl.Network.from_torch(model)
        assert net.output == output
        with torch.no_grad():
            ref = model.double()(torch.from_numpy(X)).numpy()
        np.testing.assert_allclose(net.forward(X), ref, rtol=1e-12, atol=1e-12)


def test_unsupported_torch_models_are_refused():
    torch = pytest.importorskip("torch")
    from torch import nn

    with pytest.raises(sl.UnsupportedModelError, match=r"node '1' \(Hardshrink\)"):
        sl.Network.from_torch(nn.Sequential(nn.Linear(2, 3), nn.Hardshrink(), nn.Linear(3, 1)))
    with pytest.raises(ValueError, match=r"input_shape is required: the model's first layer '0' \(Conv1d\)"):
        sl.Network.from_torch(nn.Sequential(nn.Conv1d(1, 1, 1)))
    with pytest.raises(ValueError, match="dim"):
        sl.Network.from_torch(nn.Sequential(nn.Linear(2, 3), nn.Softmax(dim=0)))
    with pytest.raises(TypeError, match="torch.nn.Module"):
        sl.Network.from_torch([nn.Linear(2, 3)])


def test_torch_parameters_without_real_values_are_refused_and_floats_converted():
    torch = pytest.importorskip("torch")
    from torch import nn

    def model():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))

    with pytest.raises(ValueError, match="layer 0 .*weight is on the meta device: it has a shape but no values"):
        sl.Network.from_torch(model().to("meta"))
    for dtype in (torch.int32, torch.bool):
        m = model()
        m[0].weight = nn.Parameter(torch.ones(3, 2, dtype=dtype), requires_grad=False)
        with pytest.raises(TypeError, match=f"weight has dtype {dtype}; expected real floating-point"):
            sl.Network.from_torch(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # torch warns that complex modules are experimental
        complex_model = model().to(torch.complex64)
    with pytest.raises(TypeError, match="complex64"):
        sl.Network.from_torch(complex_model)
    X = np.random.default_rng(0).normal(size=(5, 2))
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        m = model().to(dtype)
        net = sl.Network.from_torch(m)
        with torch.no_grad():
            expected = m.double()(torch.from_numpy(X)).numpy()     # the same (rounded) values in float64
        np.testing.assert_allclose(net.forward(X), expected, rtol=1e-12, atol=1e-12)



def test_a_graph_networks_forward_pass_in_row_blocks_is_the_whole_batchs(monkeypatch):
    from helpers.random_graphs import EVERY_STEP, random_graph, random_inputs
    from sheaflinalg.network.graph import forward as graph_forward

    net = random_graph(5, "mixed", "softmax", max_layers=5, steps=EVERY_STEP)
    X = random_inputs(net, 5, 23).reshape(23, -1)
    z = graph_forward.evaluate(net.graph, X).values[net.graph.output_node]      # every node, the whole batch
    monkeypatch.setattr(graph_forward, "OUTPUT_BLOCK_BYTES", 8 * sum(net.graph.sizes.values()) * 4)   # 4 rows
    expected = np.exp(z - z.max(axis=1, keepdims=True))
    np.testing.assert_allclose(net.forward(X), expected / expected.sum(axis=1, keepdims=True), rtol=1e-13,
                               atol=1e-15)
    fc = sl.Node("fc", "linear", ["x"], params={"weight": np.full((2, 3), 1e200), "bias": np.zeros(2)})
    big = sl.Network.from_nodes((3,), [fc, sl.Node("g", "gelu", ["fc"], {"approximate": "none"})])
    monkeypatch.setattr(graph_forward, "OUTPUT_BLOCK_BYTES", 8 * sum(big.graph.sizes.values()) * 4)
    X = np.ones((23, 3))
    X[17] = 1e200                                         # overflows in the fifth block: named in the batch
    with pytest.raises(sl.NetworkOverflowError, match="sample 17"):
        big.forward(X)
