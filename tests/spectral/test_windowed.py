"""``lambda_max`` by windows (``method="windows"``) against dense ``eigh`` of the assembled Laplacian."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.random_graphs import CNN_STEPS, graph_networks, random_inputs, random_pattern
import sheaflinalg as sl
from sheaflinalg.spectral.arpack import _start_vector
from sheaflinalg.spectral.operators.graph import GraphLaplacianOperator
from sheaflinalg.spectral.operators.graph_systems import graph_pattern
from sheaflinalg.spectral.window_tiling import Cells, cells, tilings
from sheaflinalg.spectral.windowed import WindowedLargest

CONV_NETWORKS = graph_networks(steps=CNN_STEPS, axes=(1, 2))


def _dense(net, X, pattern=None):
    """Each sample's dense ``L[Omega, Omega]`` (reduced system) from the assembled sheaf."""
    L = sl.assemble(net, X, pattern=pattern, reduced=True).laplacian_free.toarray()
    N = L.shape[0] // X.shape[0]
    return [L[s * N:(s + 1) * N, s * N:(s + 1) * N] for s in range(X.shape[0])]


def _run(problem, matvec):
    while (request := problem.request()) is not None:
        request[1][:] = matvec(request[0])
    return problem


def _windowed(net, x, level, pattern=None):
    """A :class:`WindowedLargest` of one flat input run to its end on the graph operator, and the dense ``L``."""
    pattern, _ = graph_pattern(net, x, pattern, True)
    op = GraphLaplacianOperator(net.graph, pattern)
    found = cells(net.graph, sl.Layout.for_network(net, reduced=True), level)
    problem = WindowedLargest(op.n, 1e-8, None, _start_vector(op.n), False, found)
    return _run(problem, op.single(0)[0]), found


@settings(max_examples=25, deadline=None)
@given(case=CONV_NETWORKS, level=st.sampled_from([1, 2, 4]), frozen=st.booleans())
def test_the_windows_bound_lambda_max_from_below_and_the_result_is_dense_eigh(case, level, frozen):
    net, seed, mode = case
    x = random_inputs(net, seed, 1, mode).reshape(1, -1)
    pattern = random_pattern(net, np.random.default_rng(seed), 1) if frozen else None
    problem, found = _windowed(net, x, level, pattern)
    L = _dense(net, x, pattern)[0]
    top = np.linalg.eigvalsh(L)[-1]
    report = problem.report
    np.testing.assert_allclose(report.value, top, rtol=1e-9)
    np.testing.assert_allclose(problem.result()[0][0], top, rtol=1e-9)
    if found.coords.size:
        assert report.window_value <= top * (1 + 1e-12)
        assert report.lower_bound <= top * (1 + 1e-12)
        assert report.lower_bound <= report.value * (1 + 1e-12)
        assert 0.0 <= report.truncation <= 1.0
        # the tilings' windows are separated: no entry of L between two windows of one tiling
        for tiling in problem.tilings:
            for i in range(tiling.count):
                inside = tiling.coords[tiling.window == i]
                others = tiling.coords[tiling.window != i]
                assert not np.any(L[np.ix_(inside, others)])


def test_a_period_too_short_for_a_3x3_convolution_is_refused_by_the_probes():
    rng = np.random.default_rng(0)
    conv = sl.Node("c1", "conv", ["x"], {"stride": 1, "padding": 1, "dilation": 1, "groups": 1},
                   {"weight": rng.normal(size=(2, 1, 3, 3)), "bias": rng.normal(size=2)})
    conv2 = sl.Node("c2", "conv", ["c1"], {"stride": 1, "padding": 1, "dilation": 1, "groups": 1},
                    {"weight": rng.normal(size=(2, 2, 3, 3)), "bias": rng.normal(size=2)})
    net = sl.Network.from_nodes((1, 8, 8), [conv, sl.Node("r", "relu", ["c1"]), conv2])
    x = rng.normal(size=(1, 64))
    problem, found = _windowed(net, x, 1)
    L = _dense(net, x)[0]
    report = problem.report
    assert report.period > 2 and report.products["probe"] > 0
    coupled = [t for t in tilings(found, report.period - 1) if t.count > 1
               and np.any(L[np.ix_(t.coords[t.window == 0], t.coords[t.window != 0])])]
    assert coupled            # the shorter period's windows do touch: the probes had something to find
    np.testing.assert_allclose(report.value, np.linalg.eigvalsh(L)[-1], rtol=1e-9)


def test_windows_that_miss_the_top_fall_back_to_the_random_start():
    # a diagonal operator: every window is one coordinate; the windows hold the small entries only
    d = np.linspace(1.0, 2.0, 400)
    small = np.arange(100, dtype=np.int64)
    found = Cells(small, small.reshape(-1, 1), (100,), 1)
    problem = _run(WindowedLargest(400, 1e-8, None, _start_vector(400), False, found), lambda v: d * v)
    report = problem.report
    assert report.fallback and report.products["fallback"] > 0
    assert report.window_value == pytest.approx(d[99]) and report.lower_bound == pytest.approx(d[99])
    np.testing.assert_allclose(report.value, 2.0, rtol=1e-9)


def test_the_tilings_partition_the_cells():
    graph = sl.Network.from_nodes((1, 9, 7), [sl.Node("p", "maxpool", ["x"], {"kernel_size": 2, "stride": 2,
                                                                              "padding": 0, "dilation": 1}),
                                              sl.Node("r", "relu", ["x"])]).graph
    layout = sl.Layout.from_graph(graph, reduced=True)
    assert cells(graph, layout, 2, 0).coords.size == 63       # the pool's pixels span 2.25 x 2.33 input pixels
    assert cells(graph, layout, 3).coords.size == 12          # by default not the relu's, of one input pixel
    found = cells(graph, layout, 3, 0)
    assert found.counts == (3, 3) and found.coords.size == 63 + 12
    for period in (2, 3):
        plans = tilings(found, period)
        covered = np.concatenate([t.coords for t in plans])
        assert np.array_equal(np.sort(covered), np.sort(found.coords))
        for t in plans:
            cell = found.cell[np.searchsorted(found.coords, t.coords)]
            for i in range(t.count):       # one cell per window
                assert len({tuple(c) for c in cell[t.window == i]}) == 1


@settings(max_examples=8, deadline=None)
@given(case=CONV_NETWORKS, vectors=st.booleans())
def test_spectrum_by_windows_gives_both_ends_of_dense_eigh(case, vectors):
    net, seed, mode = case
    X = random_inputs(net, seed, 2, mode)
    sp = sl.spectrum(net, X, method="windows", vectors=vectors, progress=False)
    assert sp.method == "windows" and len(sp.windows) == sp.n_distinct
    for s, L in enumerate(_dense(net, X.reshape(2, -1))):
        w = np.linalg.eigvalsh(L)
        np.testing.assert_allclose([sp.lambda_min[s], sp.lambda_max[s]], [w[0], w[-1]], rtol=1e-8)
        if vectors:
            v = sp.vectors_largest[s, 0]
            assert np.linalg.norm(L @ v - sp.lambda_max[s] * v) <= 1e-6 * w[-1]


def test_windows_are_refused_where_they_do_not_apply():
    mlp = sl.Network.random([2, 8, 1], seed=0)
    X = np.ones((1, 2))
    with pytest.raises(ValueError, match="needs a graph network"):
        sl.spectrum(mlp, X, method="windows")
    net = sl.Network.from_nodes((1, 4, 4), [sl.Node("r", "relu", ["x"])])
    x = np.ones((1, 16))
    with pytest.raises(ValueError, match="k=1"):
        sl.spectrum(net, x, method="windows", k=2)
    with pytest.raises(ValueError, match="needs method='windows'"):
        sl.spectrum(net, x, window=4)
    with pytest.raises(ValueError, match="pins"):
        sl.spectrum(net, x, method="windows", pins={"r": [0]})


@given(case=graph_networks(), threads=st.sampled_from([1, 2, 4]), seed=st.integers(0, 1000))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_product_of_a_vector_on_a_few_nodes_skips_the_others_exactly(case, threads, seed, monkeypatch):
    """Every step and activation mode: ``L w`` for ``w`` zero outside some nodes, computed on the nodes of
    :meth:`GraphCoboundary.support` alone, is the whole product (up to the sign of zeros) on one thread, bit for
    bit, with one, two or more threads than this machine's cores."""
    from sheaflinalg._common import threads as _threads
    from sheaflinalg.sheaf.matrix_free.coboundary import GraphCoboundary

    net, net_seed, mode = case
    X = random_inputs(net, net_seed, 2, mode).reshape(2, -1)
    delta = GraphCoboundary(net.graph, net.evaluate(X).pattern)
    rng = np.random.default_rng(seed)
    w = np.zeros((2, delta.layout.n_free))
    for block in delta.layout.free_blocks:
        if rng.random() < 0.3:
            w[:, block.slice] = rng.normal(size=(2, block.size))
    monkeypatch.setattr(_threads, "usable_threads", lambda n: n)
    only = delta.support(w)
    whole = delta.apply(w, 1)
    part = delta.apply(w, threads, only)
    assert np.array_equal(part, whole)
    assert np.array_equal(delta.apply_transpose(part, threads, only), delta.apply_transpose(whole, 1))
    L = _dense(net, X)[1]
    np.testing.assert_allclose(delta.apply_transpose(part, threads, only)[1], L @ w[1], rtol=1e-10, atol=1e-12)
    if only is not None:
        assert len(only) < len(net.graph.nodes)


def test_the_command_takes_the_windows(tmp_path, capsys):
    from helpers.graph_examples import every_op_network
    from sheaflinalg.cli import main

    net = every_op_network()
    path = str(tmp_path / "graph.npz")
    net.save(path)
    assert main(["spectrum", "--network", path, "--samples", "2", "--method", "windows", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "method windows" in out
    X = np.random.default_rng(42).uniform(-2.0, 2.0, size=(2, net.n_inputs))
    np.testing.assert_allclose(sl.spectrum(net, X, method="windows", progress=False).lambda_max,
                               [np.linalg.eigvalsh(L)[-1] for L in _dense(net, X)], rtol=1e-9)
