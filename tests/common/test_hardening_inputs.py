"""Issue 31: clear errors before any work for the exact flow's certificate, window tables that would not
fit in memory, and the output Jacobians of spectra."""

import types

import numpy as np
import pytest

import sheaflinalg as sl
from sheaflinalg._common import memory
from sheaflinalg.network import activations
from sheaflinalg.network.ops import geometry
from sheaflinalg.network.graph.files import graph_entries
from sheaflinalg.spectral import drivers
from sheaflinalg.spectral.operators.graph_systems import graph_pattern

NET = sl.Network.random([2, 4, 1], seed=0)


@pytest.fixture(scope="module")
def exact():
    return sl.heat(NET, [[0.5, -1.0], [1.0, 1.0]], method="exact", seed=1)


@pytest.mark.parametrize("t,error,match", [
    ([1.0, 2.0, 3.0], ValueError, r"one time or one per sample \(shape \(2,\)\), got shape \(3,\)"),
    ([[1.0, 2.0]], ValueError, r"got shape \(1, 2\)"),
    (float("nan"), ValueError, "certificate: t contains NaN"),
    ("1.0", TypeError, "certificate: t must be numeric"),
    (-1.0, ValueError, "from each sample's last event on; sample 0"),
])
def test_certificate_refuses_times_it_cannot_bound(exact, t, error, match):
    with pytest.raises(error, match=match):
        exact.certificate(t)


def test_certificate_keeps_one_time_and_one_per_sample(exact):
    one = exact.certificate(float(exact.time.max()))
    each = exact.certificate(np.full(2, exact.time.max()))
    assert one.shape == (2,) and np.array_equal(one, each)


def _dense_output_net(output, width, n_in=2):
    """A graph network (not a chain: its input is reshaped) of one linear layer of ``width`` outputs."""
    rng = np.random.default_rng(0)
    flat = sl.Node("flat", "reshape", ["x"], {"shape": (n_in,)})
    fc = sl.Node("fc", "linear", ["flat"], params={"weight": rng.normal(size=(width, n_in)), "bias": np.zeros(width)})
    return sl.Network.from_nodes((1, n_in), [flat, fc], output=output)


@pytest.mark.parametrize("output", ["identity", "sigmoid", "tanh"])
def test_elementwise_output_jacobians_of_a_graph_are_stored_as_diagonals(output):
    net = _dense_output_net(output, 7)
    X = np.random.default_rng(1).normal(size=(5, 2))
    _, J = graph_pattern(net, X, None, reduced=False)
    assert J.shape == (5, 7)
    z = net.evaluate(X).values[net.graph.output_node]
    np.testing.assert_array_equal([np.diag(activations.jacobian(output, row)) for row in z], J)


@pytest.mark.parametrize("output", ["sigmoid", "tanh", "softmax"])
def test_free_spectra_of_a_nonlinear_output_equal_dense_eigh(output):
    rng = np.random.default_rng(2)
    nodes = [sl.Node("flat", "reshape", ["x"], {"shape": (3,)}),
             sl.Node("fc1", "linear", ["flat"], params={"weight": rng.normal(size=(6, 3)), "bias": rng.normal(size=6)}),
             sl.Node("r", "relu", ["fc1"]),
             sl.Node("fc2", "linear", ["r"], params={"weight": rng.normal(size=(4, 6)), "bias": rng.normal(size=4)})]
    net = sl.Network.from_nodes((1, 3), nodes, output=output)
    assert net.is_graph
    X = rng.normal(size=(3, 3))
    L = sl.assemble(net, X, reduced=False).laplacian_free.toarray()
    N = L.shape[0] // 3
    sp = sl.spectrum(net, X, k=2, system="free", method="arpack", progress=False)
    for s in range(3):
        w = np.linalg.eigvalsh(L[s * N:(s + 1) * N, s * N:(s + 1) * N])
        np.testing.assert_allclose(sp.smallest[s], w[:2], rtol=1e-8)
        np.testing.assert_allclose(sp.largest[s], w[::-1][:2], rtol=1e-8)


@pytest.mark.parametrize("graph", [True, False])
def test_dense_softmax_jacobians_that_would_not_fit_are_refused_before_work(monkeypatch, graph):
    def work(*args):
        raise AssertionError("the spectra started")
    monkeypatch.setattr(drivers, "_graph_spectrum", work)
    monkeypatch.setattr(drivers, "_spectrum_of_patterns", work)
    monkeypatch.setattr(memory, "available_bytes", lambda: 2**30)
    net = _dense_output_net("softmax", 3000) if graph else sl.Network.random([2, 3000], seed=0, output="softmax")
    assert net.is_graph == graph
    X = np.zeros((40, 2))                                   # 40 dense 3000 x 3000 Jacobians: 2.7 GiB
    with pytest.raises(memory.InsufficientMemoryError, match="the spectra of 40 samples"):
        sl.spectrum(net, X, system="free", method="arpack", vectors=False)
    with pytest.raises(AssertionError, match="the spectra started"):   # their diagonals: 0.9 MiB
        sl.spectrum(_dense_output_net("sigmoid", 3000), X, system="free", method="arpack", vectors=False)


# Sizes that a machine could build (so that this test stays harmless on a regression) but that the
# estimate refuses under the 256 MiB it is told are available.
def _pool(**attrs):
    return sl.Node("p", "maxpool", ["x"], dict({"kernel_size": 2, "stride": 2, "padding": 0, "dilation": 1}, **attrs))


@pytest.mark.parametrize("input_shape,nodes", [
    ((1, 2 * 10**7), [_pool()]),                                           # 10**7 windows
    ((1, 4), [_pool(kernel_size=2**40, stride=1, padding=2**39)]),        # 5 windows of 2**40 taps
    ((1, 10), [sl.Node("a", "adaptive_avgpool", ["x"], {"output_size": 10**6})]),
    ((1, 4), [sl.Node("c", "conv", ["x"], {"stride": 1, "padding": 2**24, "dilation": 1, "groups": 1},
                      {"weight": np.ones((1, 1, 3)), "bias": np.zeros(1)})]),
])
def test_window_tables_that_would_not_fit_are_refused_before_they_are_built(monkeypatch, input_shape, nodes):
    monkeypatch.setattr(memory, "available_bytes", lambda: 2**28)
    with pytest.raises(memory.InsufficientMemoryError, match=f"the window table of node '{nodes[0].name}' "
                                                             f"\\({nodes[0].op}\\): about .* needed"):
        sl.Network.from_nodes(input_shape, nodes)


def test_a_small_graph_file_with_a_huge_kernel_is_refused_when_loaded(tmp_path, monkeypatch):
    big = _pool(kernel_size=2**40, stride=1, padding=2**39)
    graph = types.SimpleNamespace(input_shape=(1, 4), output="identity", nodes=(big,))
    np.savez(tmp_path / "net.npz", **graph_entries(graph))
    assert (tmp_path / "net.npz").stat().st_size < 2000
    monkeypatch.setattr(memory, "available_bytes", lambda: 2**28)
    with pytest.raises(memory.InsufficientMemoryError, match="net.npz: entry 'graph': the window table of node "
                                                         "'p' \\(maxpool\\): about 160 TiB needed"):
        sl.Network.load(tmp_path / "net.npz")


def test_checked_builders_give_the_tables_or_refuse_them(monkeypatch):
    pool = _pool()
    index, out = geometry.window_table(pool, ((5,), (3,), (2,), (1,), (1,)))
    assert (index.tolist(), out) == ([[-1, 0, 1], [1, 2, 3], [3, 4, -1]], (3,))
    monkeypatch.setattr(memory, "available_bytes", lambda: 2**28)
    with pytest.raises(memory.InsufficientMemoryError, match="the window table of node 'p' \\(maxpool\\)"):
        geometry.window_table(pool, ((4,), (2**40,), (1,), (2**39,), (1,)))


@pytest.mark.parametrize("system", ["reduced", "free"])
def test_a_chain_operator_whose_dense_output_map_would_not_fit_is_refused_before_work(monkeypatch, system):
    def work(*args):
        raise AssertionError("the spectra started")
    monkeypatch.setattr(drivers, "_spectrum_of_patterns", work)
    monkeypatch.setattr(memory, "available_bytes", lambda: 2**28)
    net = sl.Network.random([2, 5000], seed=0, output="sigmoid")          # a 5000 x 5000 map: 191 MiB, twice
    with pytest.raises(memory.InsufficientMemoryError, match="the dense 5000 x 5000 output map"):
        sl.spectrum(net, np.zeros((1, 2)), system=system, method="arpack", vectors=False)
    with pytest.raises(AssertionError, match="the spectra started"):
        sl.spectrum(net, np.zeros((1, 2)), system=system, method="dense", vectors=False)
