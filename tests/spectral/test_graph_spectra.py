"""Spectra of graph networks against dense ``eigh`` of the assembled Laplacian, eigenvectors per node."""

import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.graph_examples import every_op_network
from helpers.paths import ROOT
from helpers.random_graphs import graph_networks, random_inputs, random_pattern
import sheaflinalg as sl
from sheaflinalg._common import memory
from sheaflinalg.spectral.arpack import arpack_extremes, arpack_group
from sheaflinalg.spectral.operators.graph_systems import LARGEST_NCV, graph_ncv
from sheaflinalg.spectral.operators.graph import GraphLaplacianOperator
from sheaflinalg.spectral.operators.chain import CoboundaryOperator

NET = every_op_network()


def _dense_blocks(net, X, reduced, pattern=None):
    """Each sample's ``L[Omega, Omega]`` from the assembled sheaf, and its eigenvalues."""
    L = sl.assemble(net, X, pattern=pattern, reduced=reduced).laplacian_free.toarray()
    M = X.shape[0]
    N = L.shape[0] // M
    blocks = [L[s * N:(s + 1) * N, s * N:(s + 1) * N] for s in range(M)]
    return blocks, [np.linalg.eigvalsh(b) for b in blocks]


@settings(max_examples=10, deadline=None)
@given(case=graph_networks(outputs=("identity", "softmax")), system=st.sampled_from(["reduced", "free"]),
       method=st.sampled_from(["arpack", "dense"]), frozen=st.booleans())
def test_extremes_equal_dense_eigh_of_the_assembled_laplacian(case, system, method, frozen):
    net, seed, mode = case
    X = random_inputs(net, seed, 3, mode)
    pattern = random_pattern(net, np.random.default_rng(seed), 3) if frozen else None
    blocks, eigs = _dense_blocks(net, X, system == "reduced", pattern)
    N = blocks[0].shape[0]
    k = 2 if N > 4 else 1
    sp = sl.spectrum(net, X, k=k, system=system, method=method, pattern=pattern, progress=False)
    for s, (L, w) in enumerate(zip(blocks, eigs)):
        np.testing.assert_allclose(sp.smallest[s], w[:k], rtol=1e-8)
        np.testing.assert_allclose(sp.largest[s], w[::-1][:k], rtol=1e-8)
        assert sp.lambda_min[s] <= 1 + 1e-12 and sp.lambda_max[s] >= 1 - 1e-12      # det L = 1
        for V, lam in ((sp.vectors_smallest[s], sp.smallest[s]), (sp.vectors_largest[s], sp.largest[s])):
            np.testing.assert_allclose(np.linalg.norm(V, axis=1), 1.0, rtol=1e-10)
            assert np.all(np.linalg.norm(V @ L - lam[:, None] * V, axis=1) <= 1e-6 * w[-1])
        energy = sp.block_energy()[s]
        np.testing.assert_allclose(energy.sum(), 1.0, rtol=1e-12)
        channels = sp.channel_energy()
        np.testing.assert_allclose([channels[b][s].sum() for b in sp.block_names], energy, rtol=1e-12, atol=1e-300)


def test_the_default_krylov_space_of_lambda_max_gives_dense_eigh():
    # N > LARGEST_NCV: the lambda_max problem runs with its own larger ncv, lambda_min with ARPACK's default
    N = sl.Layout.for_network(NET, reduced=True).n_free
    assert graph_ncv(None, N, 1) == (LARGEST_NCV, None) and N > LARGEST_NCV
    X = random_inputs(NET, 3, 2, "mixed")
    sp = sl.spectrum(NET, X, method="arpack", vectors=False, progress=False)
    for s, w in enumerate(_dense_blocks(NET, X, True)[1]):
        np.testing.assert_allclose([sp.lambda_min[s], sp.lambda_max[s]], [w[0], w[-1]], rtol=1e-9)


def test_eigenvectors_in_each_nodes_shape():
    X = np.random.default_rng(0).normal(size=(3,) + NET.input_shape)
    sp = sl.spectrum(NET, X, k=2, method="arpack", system="free", progress=False)
    assert sp.block_names == [node.name for node in NET.graph.nodes] + ["yhat"]
    lay = sp.layout
    for name in sp.block_names:
        shape = NET.graph.shapes[name] if name != "yhat" else (NET.n_outputs,)
        got = sp.node_vector(name, "largest", sample=2, index=1)
        assert got.shape == tuple(shape)
        np.testing.assert_array_equal(got.ravel(), sp.vectors_largest[2, 1, lay.free(name)])
    assert sp.channel_energy()["cat"].shape == (3, 8)
    assert sp.node_shape("flat") == (16,)


def test_samples_with_one_pattern_are_diagonalised_once():
    x, y = np.random.default_rng(1).normal(size=(2, 1) + NET.input_shape)
    sp = sl.spectrum(NET, np.concatenate([x, y, x]), method="arpack", progress=False)
    assert sp.n_distinct == 2
    assert sp.lambda_min[0] == sp.lambda_min[2] != sp.lambda_min[1]


def test_a_group_of_samples_in_lockstep_gives_each_samples_spectrum():
    X = np.random.default_rng(6).normal(size=(3, 72))
    together = sl.spectrum(NET, X, k=2, method="arpack", progress=False)
    for s in range(3):
        alone = sl.spectrum(NET, X[s], k=2, method="arpack", progress=False)
        np.testing.assert_allclose(together.smallest[s], alone.smallest[0], rtol=1e-11)
        np.testing.assert_allclose(together.largest[s], alone.largest[0], rtol=1e-11)
        np.testing.assert_allclose(together.vectors_smallest[s], alone.vectors_smallest[0], atol=1e-7)


def test_the_chain_graph_of_an_mlp_gives_the_chain_operator():
    net = sl.Network.random([3, 7, 5, 2], seed=3)
    x = np.random.default_rng(3).normal(size=3)
    masks = net.activation_pattern(x)
    chain = CoboundaryOperator(net, masks)
    graph = GraphLaplacianOperator(net.graph, {f"a{l}": m[None] for l, m in enumerate(masks, start=1)})
    v = np.random.default_rng(4).normal(size=chain.n)
    np.testing.assert_allclose(graph.laplacian_matvec(v), chain.laplacian_matvec(v), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(graph.laplacian_solve(v), chain.laplacian_solve(v), rtol=1e-12)
    ends = [arpack_extremes(chain.apply_pair, chain.laplacian_matvec, chain.laplacian_solve, chain.n, 2, 1e-10,
                            None, None, 0),
            arpack_group(graph.apply_batch, graph.single, graph.n, 2, 1e-10, None, None, [0])[0]]
    for i in (0, 2):
        np.testing.assert_allclose(ends[1][i], ends[0][i], rtol=1e-10)


def test_unknown_node_names_the_closest():
    sp = sl.spectrum(NET, np.ones((1, 72)), progress=False)
    with pytest.raises(ValueError, match="no block 'conv11'; did you mean 'conv1'"):
        sp.node_vector("conv11")
    with pytest.raises(ValueError, match="sample must be an integer in"):
        sp.node_vector("conv1", sample=1)


def test_eigenvectors_that_would_not_fit_are_refused_first(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: 2**20)
    with pytest.raises(sl.InsufficientMemoryError, match=r"N=971 stalk coordinates, 400 eigenvectors each.*smaller k"):
        sl.spectrum(NET, np.ones((100, 72)), k=200, method="arpack", progress=False)


def test_the_memory_estimate_counts_the_lanczos_recurrence_not_arpacks_space(monkeypatch):
    from sheaflinalg.spectral import drivers

    seen = []

    def record(n_samples, N, k, vectors, ncv):
        seen.append((N, ncv))
        raise RuntimeError("estimated")

    monkeypatch.setattr(drivers, "_check_vector_memory", record)
    rng = np.random.default_rng(0)
    conv = {"stride": 1, "padding": 1, "dilation": 1, "groups": 1}
    wide = sl.Network.from_nodes((1, 1000), [
        sl.Node("conv", "conv", ["x"], conv, {"weight": rng.normal(size=(12, 1, 3)), "bias": np.zeros(12)}),
        sl.Node("relu", "relu", ["conv"]),
        sl.Node("flat", "reshape", ["relu"], {"shape": (12000,)}),
        sl.Node("fc", "linear", ["flat"], params={"weight": rng.normal(size=(2, 12000)), "bias": np.zeros(2)})])
    for ncv, expected in ((None, (drivers.LANCZOS_VECTORS, None)), (30, 30)):
        with pytest.raises(RuntimeError, match="estimated"):
            sl.spectrum(wide, np.ones((1, 1000)), ncv=ncv, progress=False)
        assert seen[-1][0] >= 20_000 and seen[-1][1] == expected


def test_a_graph_input_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match="72"):
        sl.spectrum(NET, np.ones((2, 71)), progress=False)


def test_the_tracker_records_a_graph_network():
    X = np.random.default_rng(2).normal(size=(2, 72))
    tracker = sl.SpectralTracker(X, method="arpack")
    tracker(SimpleNamespace(method="sgd", epoch=0, step=0, network=NET, X=None))
    rec = tracker.records[0]
    assert rec["blocks"][0] == "conv1" and np.isclose(rec["energy_min"].sum(), 1.0)
    assert rec["lambda_min"]["median"] == np.median(sl.spectrum(NET, X, method="arpack", progress=False).lambda_min)


def test_the_command_prints_a_table_per_node(tmp_path):
    path = str(tmp_path / "graph.npz")
    NET.save(path)
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    done = subprocess.run([sys.executable, "-m", "sheaflinalg.cli", "spectrum", "--network", path, "--samples", "3",
                           "--no-progress"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines() if line.split()}
    for node in NET.graph.nodes:
        assert rows[node.name][1] == node.op, done.stdout
    assert rows["cat"][2] == "(8,3,3)", done.stdout


def test_the_nodes_of_a_pass_in_two_threads_change_nothing(monkeypatch):
    from sheaflinalg._common import threads as _threads
    from sheaflinalg.sheaf.matrix_free.coboundary import GraphCoboundary

    X = np.random.default_rng(8).normal(size=(3, 72))
    delta = GraphCoboundary(NET.graph, NET.evaluate(X).pattern, np.broadcast_to(np.eye(3), (3, 3, 3)))
    w = np.random.default_rng(9).normal(size=(3, delta.layout.n_free))
    monkeypatch.setattr(_threads, "usable_threads", lambda n: n)
    assert sorted(delta._halves()[0] + delta._halves()[1]) == list(range(len(NET.graph.nodes)))
    assert delta.apply(w, threads=2).tobytes() == delta.apply(w).tobytes()
    assert delta.apply_transpose(w, threads=2).tobytes() == delta.apply_transpose(w).tobytes()


@given(case=graph_networks(outputs=("identity", "softmax")))
@settings(max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_both_passes_of_random_graphs_in_two_threads_are_the_one_thread_passes(case, monkeypatch):
    """Every step and activation mode (all active, all dead, mixed, exact zeros, max-pool ties): ``delta w`` and
    ``delta^T e`` with the nodes (and the transpose's sums) shared by two threads are the one-thread passes, bit
    for bit."""
    from sheaflinalg._common import threads as _threads
    from sheaflinalg.sheaf.matrix_free.coboundary import GraphCoboundary

    net, seed, mode = case
    X = random_inputs(net, seed, 2, mode).reshape(2, -1)
    z = net.evaluate(X)
    delta = GraphCoboundary(net.graph, z.pattern, np.ones((2, net.graph.n_outputs)))
    w = np.random.default_rng(seed).normal(size=(2, delta.layout.n_free))
    monkeypatch.setattr(_threads, "usable_threads", lambda n: n)
    assert sorted(delta._sums()[0] + delta._sums()[1]) == list(range(len(net.graph.nodes)))
    for threads in (2, 8):          # 8: more threads than this machine's cores
        assert delta.apply(w, threads=threads).tobytes() == delta.apply(w).tobytes()
        assert delta.apply_transpose(w, threads=threads).tobytes() == delta.apply_transpose(w).tobytes()


def test_the_two_products_of_a_step_in_two_threads_change_nothing(monkeypatch):
    from sheaflinalg._common import threads as _threads

    X = np.random.default_rng(5).normal(size=(2, 72))
    one = sl.spectrum(NET, X, k=2, method="arpack", threads=1, progress=False)
    monkeypatch.setattr(_threads, "usable_threads", lambda n: n)       # a second core, whatever the load
    for threads in (2, 4):                                             # 4: more threads than cores
        two = sl.spectrum(NET, X, k=2, method="arpack", threads=threads, progress=False)
        for name in ("smallest", "largest", "vectors_smallest", "vectors_largest"):
            assert getattr(one, name).tobytes() == getattr(two, name).tobytes(), (threads, name)
        assert one.n_operator == two.n_operator


def test_a_pinned_node_leaves_the_spectrum_of_the_augmented_laplacian():
    X = np.random.default_rng(7).normal(size=(2, 72))
    pins = {"fc": np.zeros(3)}
    sp = sl.spectrum(NET, X, pins=pins, progress=False)
    L = sl.assemble(NET, X, reduced=True, pins=pins).laplacian_free.toarray()
    N = L.shape[0] // 2
    for s in range(2):
        w = np.linalg.eigvalsh(L[s * N:(s + 1) * N, s * N:(s + 1) * N])
        np.testing.assert_allclose([sp.lambda_min[s], sp.lambda_max[s]], [w[0], w[-1]], rtol=1e-8)
    assert "fc" not in sp.block_names and sp.node_vector("cat", sample=1).shape == (8, 3, 3)
