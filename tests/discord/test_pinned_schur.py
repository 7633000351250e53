"""The pinned solve of many outputs by conjugate gradients on the k x k system (sheaflinalg.discord.pinning.schur)
against the direct path through G and a naive dense pinned minimiser; the memory refusal before any work."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.naive_graph import coboundary
from helpers.random_graphs import graph_networks, random_inputs
import sheaflinalg as sl
from sheaflinalg._common import memory
from sheaflinalg.discord.pinning import graph as pinning, schur
from sheaflinalg.network.graph.forward import evaluate


def _naive_pinned(net, lay, x, pattern, held, targets):
    """The minimiser of ``||delta w + c||^2`` over the free coordinates with ``w[held] = targets``, from the
    dense coboundary of the definitions (one sample, its pattern)."""
    delta, u, _ = coboundary(net.graph, lay, x, pattern, reduced=True)
    D = delta[:, lay.free_index]
    free = np.setdiff1d(np.arange(lay.n_free), held)
    w = np.zeros(lay.n_free)
    w[held] = targets
    w[free] = np.linalg.lstsq(D[:, free], -(delta @ u + D[:, held] @ targets), rcond=None)[0]
    return w


def _solvers(net):
    """The same frozen solve by both paths: ``G`` substituted, and conjugate gradients (``DIRECT_K = 0``)."""
    sheaf_maps = pinning.GraphSheaf(net.graph).maps
    direct, iterative = pinning._MatrixFree(net.graph, sheaf_maps), pinning._MatrixFree(net.graph, sheaf_maps)
    iterative.DIRECT_K = 0
    return direct, iterative


@settings(max_examples=8, deadline=None)
@given(case=graph_networks(), held=st.integers(0, 2))
def test_conjugate_gradients_solve_the_frozen_pinned_problem_as_g_and_the_dense_minimiser(case, held):
    net, seed, mode = case          # every mode: all active, all dead, mixed, max-pool ties and exact zeros
    X = random_inputs(net, seed, 3, mode).reshape(3, -1)
    rng = np.random.default_rng(seed)
    Y = net.forward(X) + rng.normal(0, 0.5, size=(3, net.n_outputs))
    direct, iterative = _solvers(net)
    lay = direct.layout
    pattern = evaluate(net.graph, X).pattern
    inner = [(node.name, j) for node in net.graph.nodes[:-1] for j in range(net.graph.sizes[node.name])]
    surface = [inner[i] for i in rng.choice(len(inner), size=min(held, len(inner)), replace=False)]
    for s in range(3):
        one = {name: p[s:s + 1] for name, p in pattern.items()}
        got = iterative(X[s:s + 1], Y[s:s + 1], one, surface)[0]
        want = direct(X[s:s + 1], Y[s:s + 1], one, surface)[0]
        index = np.concatenate([direct.output, [lay.free(u).start + j for u, j in surface]]).astype(int)
        naive = _naive_pinned(net, lay, X[s], {n: p[0] for n, p in one.items()}, index,
                              np.concatenate([Y[s], np.zeros(len(surface))]))
        scale = 1.0 + np.abs(naive).max()
        np.testing.assert_allclose(want, naive, atol=1e-8 * scale)
        np.testing.assert_allclose(got, naive, atol=1e-8 * scale)
    assert iterative.steps > 0


def _naive_held(net, lay, x, pattern, index, minus, targets):
    """The minimiser of ``||delta w + c||^2`` over the free coordinates with ``E^T w = targets`` (``E``'s columns
    ``e_i``, or ``e_i - e_j`` for a pair held equal), from the dense coboundary and the KKT system."""
    delta, u, _ = coboundary(net.graph, lay, x, pattern, reduced=True)
    D = delta[:, lay.free_index]
    E = np.zeros((lay.n_free, index.size))
    E[index, np.arange(index.size)] = 1.0
    pair = np.flatnonzero(minus >= 0)
    E[minus[pair], pair] = -1.0
    n = lay.n_free
    kkt = np.block([[D.T @ D, E], [E.T, np.zeros((index.size, index.size))]])
    return np.linalg.solve(kkt, np.concatenate([-D.T @ (delta @ u), targets]))[:n]


@settings(max_examples=8, deadline=None)
@given(case=graph_networks(), n_pairs=st.integers(1, 3), held=st.integers(0, 1))
def test_pairs_held_equal_by_conjugate_gradients_are_the_direct_solve_and_the_dense_minimiser(case, n_pairs, held):
    net, seed, mode = case          # every mode; pairs may share an entry (a group of three held equal)
    X = random_inputs(net, seed, 2, mode).reshape(2, -1)
    rng = np.random.default_rng(seed)
    Y = net.forward(X) + rng.normal(0, 0.5, size=(2, net.n_outputs))
    direct, iterative = _solvers(net)
    lay = direct.layout
    inner = [node.name for node in net.graph.nodes[:-1] if net.graph.sizes[node.name] >= 3]
    if not inner:
        return
    u = inner[rng.integers(len(inner))]
    entries = rng.choice(net.graph.sizes[u], size=min(n_pairs + 1, net.graph.sizes[u]), replace=False)
    surface = [(u, int(min(a, b)), int(max(a, b))) for a, b in zip(entries[:-1], entries[1:])]
    others = [(v, j) for v in inner if v != u for j in range(net.graph.sizes[v])]
    surface += [others[i] for i in rng.choice(len(others), size=min(held, len(others)), replace=False)]
    index, minus = direct._columns(surface)
    pattern = evaluate(net.graph, X).pattern
    for s in range(2):
        one = {name: p[s:s + 1] for name, p in pattern.items()}
        got = iterative(X[s:s + 1], Y[s:s + 1], one, surface)[0]
        want = direct(X[s:s + 1], Y[s:s + 1], one, surface)[0]
        naive = _naive_held(net, lay, X[s], {n: p[0] for n, p in one.items()}, index, minus,
                            np.concatenate([Y[s], np.zeros(len(surface))]))
        scale = 1.0 + np.abs(naive).max()
        np.testing.assert_allclose(want, naive, atol=1e-8 * scale)
        np.testing.assert_allclose(got, naive, atol=1e-8 * scale)
        for held_pair in surface[:len(entries) - 1]:        # held equal exactly
            start = lay.free(u).start
            assert got[start + held_pair[1]] == got[start + held_pair[2]]
    assert iterative.steps > 0


def _conv_net(n_out=40):
    """A small convolutional network with a max pool and a wide linear head."""
    return sl.Network.from_nodes((2, 6, 6), [
        sl.Node("c", "conv", ["x"], {"stride": 1, "padding": 1, "dilation": 1, "groups": 1},
                {"weight": np.random.default_rng(0).normal(size=(3, 2, 3, 3)), "bias": np.zeros(3)}),
        sl.Node("r", "relu", ["c"]),
        sl.Node("p", "maxpool", ["r"], {"kernel_size": 2, "stride": 2, "padding": 0, "dilation": 1}),
        sl.Node("f", "reshape", ["p"], {"shape": (27,)}),
        sl.Node("fc", "linear", ["f"], params={"weight": np.random.default_rng(1).normal(size=(n_out, 27)),
                                                 "bias": np.zeros(n_out)})])


def test_the_pinned_discord_by_conjugate_gradients_is_the_direct_ones(monkeypatch):
    net = _conv_net()
    X = np.random.default_rng(2).uniform(-1, 1, size=(3, 72))
    X[0] = 0.5                      # a constant image: every pooling window ties
    Y = net.forward(X) + np.random.default_rng(3).normal(size=(3, 40))
    want = sl.discord.pinned(net, X, Y, progress=False)
    monkeypatch.setattr(pinning._MatrixFree, "DIRECT_K", 0)     # 40 outputs by conjugate gradients
    got = sl.discord.pinned(net, X, Y, progress=False)
    np.testing.assert_allclose(got.state, want.state, atol=1e-8 * (1 + np.abs(want.state).max()))
    np.testing.assert_array_equal(got.settled, want.settled)


def test_a_pinned_discord_that_would_not_fit_is_refused_before_any_work(monkeypatch):
    net = _conv_net(4)
    monkeypatch.setattr(memory, "available_bytes", lambda: 2**10)
    monkeypatch.setattr(pinning, "BATCH_FLOOR", 0)
    monkeypatch.setattr(pinning, "iterate_pattern", lambda *a, **k: pytest.fail("work started"))
    with pytest.raises(sl.InsufficientMemoryError, match=r"pinned discord of 50 sample\(s\) \(4 outputs.*fewer samples"):
        sl.discord.pinned(net, np.ones((50, 72)), np.ones((50, 4)), progress=False)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**16), m=st.integers(1, 6), repeated=st.booleans())
def test_the_recycled_preconditioner_is_symmetric_positive_definite_and_inverts_s_on_the_directions(seed, m, repeated):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(6, 6))
    S = np.eye(6) + A @ A.T
    Z = rng.normal(size=(1, m, 6))
    if repeated:                    # a dependent direction and a zero one (a sample that stopped early)
        Z = np.concatenate([Z, 2 * Z[:, :1], np.zeros((1, 1, 6))], axis=1)
    H = np.stack([schur.recycled(Z, Z @ S)(e[None])[0] for e in np.eye(6)])
    np.testing.assert_allclose(H, H.T, atol=1e-10)
    assert np.linalg.eigvalsh(H).min() > 0
    np.testing.assert_allclose(H @ S @ Z[0].T, Z[0].T, atol=1e-8 * (1 + np.abs(Z).max()))


def test_loose_solves_then_tightened_give_the_tight_solves_state(monkeypatch):
    net = _conv_net()
    X = np.random.default_rng(4).uniform(-1, 1, size=(2, 72))
    X[1, :36] = 0.0                 # exact zero pre-activations where the bias is 0
    Y = net.forward(X) + 0.5 * np.random.default_rng(5).normal(size=(2, 40))
    monkeypatch.setattr(pinning._MatrixFree, "DIRECT_K", 0)
    tols = []
    original = pinning.schur_cg
    monkeypatch.setattr(pinning, "schur_cg", lambda *a, **k: tols.append(k["tol"]) or original(*a, **k))
    monkeypatch.setattr(pinning._MatrixFree, "LOOSE", None)
    tight = sl.discord.pinned(net, X, Y, progress=False)
    assert set(tols) == {schur.TOL}
    monkeypatch.setattr(pinning._MatrixFree, "LOOSE", 1e-4)
    tols.clear()
    loose = sl.discord.pinned(net, X, Y, progress=False)
    assert 1e-4 in tols and schur.TOL in tols          # loose first, tightened where the pattern held
    np.testing.assert_array_equal(loose.settled, tight.settled)
    settled = tight.settled
    assert settled.any()
    np.testing.assert_allclose(loose.state[settled], tight.state[settled],
                               atol=1e-9 * (1 + np.abs(tight.state).max()))


def test_a_solve_through_g_that_would_not_fit_is_refused_with_what_needs_it(monkeypatch):
    net = _conv_net(4)              # four outputs: the direct path (G), checked at the solve itself
    monkeypatch.setattr(memory, "available_bytes", lambda: 2**10)
    with pytest.raises(sl.InsufficientMemoryError, match=r"pinned solve through G \(4 held coordinates"):
        sl.discord.pinned(net, np.ones((1, 72)), np.ones((1, 4)), progress=False)
