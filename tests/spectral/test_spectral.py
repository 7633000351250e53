"""Spectral diagnostics against numpy.linalg.eigh of dense matrices written from the paper.

The naive coboundary below is built edge by edge from the definitions of
section 3 (no Layout, no assembler): weight edge ``z_l - W_l a_(l-1)``,
ReLU edge ``a_l - R_l z_l``, output edge ``yhat - J z(k+1)``, then
``L[Omega, Omega] = delta_Omega^T delta_Omega``.
"""

import os
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sheaflinalg as sl
from sheaflinalg.spectral import CoboundaryOperator, SpectrumConvergenceError, spectrum_of_system
from sheaflinalg.kernels.substitution import PARALLEL_MIN

RTOL = 1e-9


# ----------------------------------------------------------------- naive
def naive_coboundary(weights, masks, jacobian=None):
    """Dense delta_Omega of one sample; columns z1, a1, ..., z(k+1)[, yhat]; returns (D, names, sizes)."""
    k = len(weights) - 1
    names, sizes = [], []
    for l in range(1, k + 1):
        names += [f"z{l}", f"a{l}"]
        sizes += [weights[l - 1].shape[0]] * 2
    names.append(f"z{k + 1}")
    sizes.append(weights[-1].shape[0])
    if jacobian is not None:
        names.append("yhat")
        sizes.append(weights[-1].shape[0])
    off = dict(zip(names, np.cumsum([0] + sizes[:-1])))
    size = dict(zip(names, sizes))
    N = sum(sizes)
    rows = []

    def edge(entries):
        n = entries[0][1].shape[0]
        R = np.zeros((n, N))
        for name, block in entries:
            R[:, off[name]:off[name] + size[name]] += block
        rows.append(R)

    n1 = weights[0].shape[0]
    edge([("z1", np.eye(n1))])  # x and 1 are boundary
    for l in range(1, k + 1):
        n = weights[l - 1].shape[0]
        edge([(f"z{l}", -np.diag(masks[l - 1].astype(float))), (f"a{l}", np.eye(n))])
        m = weights[l].shape[0]
        edge([(f"a{l}", -weights[l]), (f"z{l + 1}", np.eye(m))])
    if jacobian is not None:
        m = weights[-1].shape[0]
        edge([(f"z{k + 1}", -jacobian), ("yhat", np.eye(m))])
    return np.vstack(rows), names, sizes


def naive_jacobian(output, z):
    if output == "identity":
        return np.eye(z.size)
    if output == "sigmoid":
        s = 1 / (1 + np.exp(-z))
        return np.diag(s * (1 - s))
    if output == "tanh":
        return np.diag(1 - np.tanh(z) ** 2)
    e = np.exp(z - z.max())
    p = e / e.sum()
    return np.diag(p) - np.outer(p, p)


def naive_forward_z(net, x, masks):
    a = x
    for l, (W, b) in enumerate(zip(net.weights, net.biases)):
        z = W @ a + b
        if l < net.n_hidden:
            a = z * masks[l]
    return z


def naive_laplacians(net, X, masks, system):
    out = []
    for s in range(X.shape[0]):
        ms = [m[s] for m in masks]
        J = None
        if system == "free":
            J = naive_jacobian(net.output, naive_forward_z(net, X[s], ms))
        D, names, sizes = naive_coboundary(net.weights, ms, J)
        out.append((D.T @ D, names, sizes))
    return out


def assert_matches(res, refs, k, check_vectors=True):
    for s, (L, names, sizes) in enumerate(refs):
        w, V = np.linalg.eigh(L)
        N = w.size
        np.testing.assert_allclose(res.smallest[s], w[:k], rtol=RTOL, atol=0)
        np.testing.assert_allclose(res.largest[s], w[::-1][:k], rtol=RTOL, atol=0)
        assert res.condition[s] == pytest.approx(w[-1] / w[0], rel=RTOL)
        if not check_vectors or res.vectors_smallest is None:
            continue
        scale = w[-1]
        for which, idx in (("smallest", range(k)), ("largest", range(N - 1, N - 1 - k, -1))):
            Vr = res.vectors_smallest if which == "smallest" else res.vectors_largest
            for i, j in enumerate(idx):
                gap = min(abs(w[j] - w[jj]) for jj in range(N) if jj != j) if N > 1 else np.inf
                if gap < 1e-4 * scale:
                    continue  # (nearly) repeated eigenvalue: the eigenvector is not unique
                v = Vr[s, i]
                assert abs(np.linalg.norm(v) - 1) < 1e-10
                assert abs(abs(v @ V[:, j]) - 1) < 1e-8, (which, i, abs(v @ V[:, j]))


# --------------------------------------------------------- strategies
@st.composite
def cases(draw):
    depth = draw(st.integers(0, 3))
    dims = [draw(st.integers(1, 4))] + [draw(st.integers(1, 6)) for _ in range(depth)] + [draw(st.integers(1, 3))]
    output = draw(st.sampled_from(["identity", "sigmoid", "tanh", "softmax"]))
    if output == "softmax" and dims[-1] < 2:
        dims[-1] = 2
    seed = draw(st.integers(0, 10_000))
    net = sl.Network.random(dims, seed=seed, output=output)
    rng = np.random.default_rng(seed)
    M = draw(st.integers(1, 3))
    kind = draw(st.sampled_from(["forward", "active", "dead", "mixed", "zero"]))
    X = rng.uniform(-2, 2, size=(M, dims[0]))
    pattern = None
    if kind == "active":
        pattern = [np.ones(n, dtype=bool) for n in dims[1:-1]]
    elif kind == "dead":
        pattern = [np.zeros(n, dtype=bool) for n in dims[1:-1]]
    elif kind == "mixed":
        pattern = [rng.random((M, n)) < 0.5 for n in dims[1:-1]]
    elif kind == "zero":
        X = np.zeros((M, dims[0]))  # zero biases: every pre-activation is exactly 0 (active)
    return net, X, pattern


def masks_of(net, X, pattern):
    if pattern is None:
        return [z >= 0 for z in net.forward_states(X)[0][:-1]]
    return [np.broadcast_to(p, (X.shape[0], p.shape[-1])) for p in pattern]


# ------------------------------------------------------------- tests
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.sampled_from(["reduced", "free"]), st.sampled_from(["dense", "arpack"]), st.integers(1, 3))
def test_against_naive_eigh(case, system, method, k):
    net, X, pattern = case
    refs = naive_laplacians(net, X, masks_of(net, X, pattern), system)
    N = refs[0][0].shape[0]
    if method == "arpack" and N < 3:
        method = "dense"
    k = min(k, N - 1 if method == "arpack" else N)
    res = sl.spectrum(net, X, k=k, system=system, pattern=pattern, method=method, tol=1e-12, progress=False)
    assert res.method == method
    assert_matches(res, refs, k)
    # block energies: sum to 1 and equal the naive block norms
    for which in ("smallest", "largest"):
        E = res.block_energy(which)
        np.testing.assert_allclose(E.sum(axis=1), 1.0, rtol=0, atol=1e-12)
        names, sizes = refs[0][1], refs[0][2]
        assert res.block_names == names
        V = res.vectors_smallest if which == "smallest" else res.vectors_largest
        bounds = np.cumsum([0] + sizes)
        naive = np.stack([np.sum(V[:, 0, a:b] ** 2, axis=1) for a, b in zip(bounds[:-1], bounds[1:])], axis=1)
        np.testing.assert_allclose(E, naive, rtol=0, atol=1e-14)


@settings(max_examples=25, deadline=None)
@given(cases(), st.sampled_from(["reduced", "free"]))
def test_substitution_kernels_against_dense_delta(case, system):
    net, X, pattern = case
    masks = masks_of(net, X, pattern)
    for s in range(X.shape[0]):
        ms = [m[s] for m in masks]
        J = naive_jacobian(net.output, naive_forward_z(net, X[s], ms)) if system == "free" else None
        D, _, _ = naive_coboundary(net.weights, ms, J)
        op = CoboundaryOperator(net, ms, J)
        v = np.random.default_rng(s).standard_normal(D.shape[0])
        np.testing.assert_allclose(op.laplacian_matvec(v), D.T @ (D @ v), rtol=1e-12, atol=1e-12 * np.abs(v).max())
        np.testing.assert_allclose(op.solve(v), np.linalg.solve(D, v), rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(op.solve_transpose(v), np.linalg.solve(D.T, v), rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(D @ op.laplacian_solve(v), np.linalg.solve(D.T, v), rtol=1e-9, atol=1e-9)
        # L v and L^{-1} w in one call, serially and with every matrix split into row blocks for two threads
        w = np.random.default_rng(s + 100).standard_normal(D.shape[0])
        L = D.T @ D
        outs = []
        for threads in (1, 2):
            op_t = CoboundaryOperator(net, ms, J, threads=threads)
            op_t.block_entries = 1
            Lv, Linv = np.full(D.shape[0], np.nan), np.full(D.shape[0], np.nan)
            op_t.apply_pair((v, Lv), (w, Linv))
            np.testing.assert_allclose(Lv, L @ v, rtol=1e-12, atol=1e-12 * np.abs(v).max())
            np.testing.assert_allclose(L @ Linv, w, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(L).max() * np.abs(Linv).max()))
            outs.append((Lv, Linv))
        np.testing.assert_array_equal(outs[0][0], outs[1][0])
        np.testing.assert_array_equal(outs[0][1], outs[1][1])


def test_wide_layers_use_the_unrolled_rows():
    # widths not multiples of 4 exercise both the 4-row blocks and the remainder rows
    net = sl.Network.random([3, 13, 11, 7, 2], seed=5, output="softmax")
    x = np.random.default_rng(0).uniform(-2, 2, size=(1, 3))
    ms = [m[0] for m in net.activation_pattern(x)]
    J = naive_jacobian("softmax", naive_forward_z(net, x[0], ms))
    D, _, _ = naive_coboundary(net.weights, ms, J)
    op = CoboundaryOperator(net, ms, J)
    V = np.random.default_rng(1).standard_normal((D.shape[0], 3))
    for v in V.T:
        np.testing.assert_allclose(op.laplacian_matvec(v), D.T @ D @ v, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(op.laplacian_solve(v), np.linalg.solve(D.T @ D, v), rtol=1e-9, atol=1e-12)


def test_arpack_path_on_a_larger_network_and_threads_agree():
    # W2 has 300 * 260 >= PARALLEL_MIN entries: threads=2 splits its rows over two threads
    net = sl.Network.random([3, 300, 260, 2], seed=1, output="sigmoid")
    assert 300 * 260 >= PARALLEL_MIN
    X = np.random.default_rng(2).uniform(-2, 2, size=(2, 3))
    for system in ("reduced", "free"):
        refs = naive_laplacians(net, X, masks_of(net, X, None), system)
        r1 = sl.spectrum(net, X, k=3, system=system, method="arpack", threads=1, progress=False)
        r2 = sl.spectrum(net, X, k=3, system=system, method="arpack", threads=2, progress=False)
        assert r1.method == "arpack" and r1.n_operator > 0
        assert_matches(r1, refs, 3)
        np.testing.assert_array_equal(r1.smallest, r2.smallest)
        np.testing.assert_array_equal(r1.vectors_largest, r2.vectors_largest)
        # default tol 1e-8 on the Ritz residuals of L (largest) and of L^{-1} (smallest: the
        # residual in L is then amplified by at most the condition number)
        assert np.all(r1.residuals[:, 1] < 1e-8)
        assert np.all(r1.residuals[:, 0] < 1e-8 * r1.condition)
        r3 = sl.spectrum(net, X, k=3, system=system, method="arpack", tol=1e-10, progress=False)
        assert np.all(r3.residuals < 1e-8)
        for L, *_ in refs:  # the reported residuals are the true ones
            for res, lam, V in ((r1.residuals[0, 0], r1.smallest[0], r1.vectors_smallest[0]),
                                (r1.residuals[0, 1], r1.largest[0], r1.vectors_largest[0])):
                true = max(np.linalg.norm(L @ v - l * v) / l for l, v in zip(lam, V))
                assert true == pytest.approx(res, rel=1e-3, abs=1e-14)
            break


@pytest.mark.parametrize("method", ["dense", "arpack"])
def test_samples_sharing_a_pattern_share_the_laplacian(method):
    net = sl.Network.random([2, 9, 6, 1], seed=4)
    X = np.random.default_rng(6).uniform(-2, 2, size=(7, 2))
    X = np.vstack([X, X[:3] * 1.01])  # (most likely) the same patterns as the first three
    res = sl.spectrum(net, X, k=2, method=method, tol=1e-12, progress=False)
    P = np.concatenate(net.activation_pattern(X), axis=1)
    assert res.n_distinct == len(np.unique(P, axis=0)) < X.shape[0]
    assert_matches(res, naive_laplacians(net, X, masks_of(net, X, None), "reduced"), 2)
    one = sl.spectrum(net, X, pattern=[np.ones(9, bool), np.zeros(6, bool)], method=method, progress=False)
    assert one.n_distinct == 1 and np.all(one.lambda_min == one.lambda_min[0])
    sig = sl.Network.random([2, 9, 6, 1], seed=4, output="sigmoid")
    free = sl.spectrum(sig, X, system="free", method=method, progress=False)
    assert free.n_distinct == X.shape[0]  # J depends on the sample


def test_dense_batch_split_over_threads_gives_the_same_result():
    net = sl.Network.random([2, 12, 9, 2], seed=8, output="softmax")
    X = np.random.default_rng(5).uniform(-2, 2, size=(11, 2))
    a = sl.spectrum(net, X, k=2, system="free", threads=1)
    b = sl.spectrum(net, X, k=2, system="free", threads=2)
    assert a.method == b.method == "dense"
    np.testing.assert_array_equal(a.smallest, b.smallest)
    np.testing.assert_array_equal(a.vectors_largest, b.vectors_largest)
    np.testing.assert_array_equal(a.residuals, b.residuals)


def test_full_spectrum_and_auto_method():
    net = sl.Network.random([2, 7, 5, 1], seed=3)
    X = np.random.default_rng(0).uniform(-2, 2, size=(4, 2))
    res = sl.spectrum(net, X, full=True, vectors=False)
    refs = naive_laplacians(net, X, masks_of(net, X, None), "reduced")
    for s, (L, _, _) in enumerate(refs):
        np.testing.assert_allclose(res.eigenvalues[s], np.linalg.eigvalsh(L), rtol=RTOL, atol=1e-13)
    assert res.method == "dense" and res.vectors_smallest is None
    big = sl.spectrum(net, X, dense_max=5, progress=False)
    assert big.method == "arpack"
    np.testing.assert_allclose(big.lambda_min, res.lambda_min, rtol=RTOL)


# ------------------------------------------------ generic and augmented systems
def _blocks_of(L, M):
    n = L.shape[0] // M
    return [L[s * n:(s + 1) * n, s * n:(s + 1) * n] for s in range(M)]


@pytest.mark.parametrize("solver", ["cholmod", "superlu"])
@pytest.mark.parametrize("kwargs", [
    dict(pins={"a1[0,2]": 0.5}),
    dict(pins={"yhat": 1.0}),
    dict(soft_pins=({"yhat": 1.0, "z2[1]": 0.0}, 2.0)),
    dict(reluctance=0.1),
    dict(reduced=True, pins={"z2": 0.0}, reluctance=0.3),
], ids=["hard", "hard-output", "soft", "reluctance", "reduced-mixed"])
def test_augmented_systems(kwargs, solver):
    net = sl.Network.random([2, 6, 5, 1], seed=3)
    X = np.random.default_rng(0).uniform(-2, 2, size=(3, 2))
    s = sl.assemble(net, X, **kwargs)
    assert s.delta_free.shape[0] > s.delta_free.shape[1]  # tall: needs the factor path
    refs = []
    for Ls in _blocks_of(s.laplacian_free.toarray(), 3):
        refs.append((Ls, None, None))
    res = spectrum_of_system(s, k=2, method="arpack", solver=solver, tol=1e-12, progress=False)
    assert res.method == solver
    assert_matches(res, refs, 2)
    np.testing.assert_allclose(res.block_energy().sum(axis=1), 1.0, atol=1e-12)
    dense = spectrum_of_system(s, k=2, method="dense")
    assert_matches(dense, refs, 2)
    with pytest.raises(ValueError, match="substitution"):
        spectrum_of_system(s, solver="substitution")


def test_spectrum_accepts_pins_directly():
    net = sl.Network.random([2, 7, 1], seed=2)
    X = np.random.default_rng(1).uniform(-2, 2, size=(2, 2))
    a = sl.spectrum(net, X, k=2, system="free", pins={"yhat": 0.5}, reluctance=0.2, method="arpack",
                    solver="superlu", tol=1e-12, progress=False)
    s = sl.assemble(net, X, pins={"yhat": 0.5}, reluctance=0.2)
    refs = [(L, None, None) for L in _blocks_of(s.laplacian_free.toarray(), 2)]
    assert a.method == "superlu" and "yhat" not in a.block_names
    assert_matches(a, refs, 2)


class _FakeSystem(sl.SheafSystem):
    """A system built from given matrices (spectrum_of_system takes SheafSystems only)."""

    def __init__(self, **matrices):
        self.__dict__.update(matrices)


def test_reluctance_is_a_shift_of_the_naive_laplacian():
    # built in the test: delta stacked over sqrt(lam) I  ->  L + lam I
    lam = 0.25
    net = sl.Network.random([2, 5, 4, 2], seed=7, output="tanh")
    X = np.random.default_rng(3).uniform(-2, 2, size=(2, 2))
    refs = naive_laplacians(net, X, masks_of(net, X, None), "free")
    Ds = [naive_coboundary(net.weights, [m[s] for m in masks_of(net, X, None)],
                           naive_jacobian("tanh", naive_forward_z(net, X[s], [m[s] for m in masks_of(net, X, None)])))[0]
          for s in range(2)]
    N = Ds[0].shape[1]
    tall = sp.block_diag([np.vstack([D, np.sqrt(lam) * np.eye(N)]) for D in Ds], format="csr")
    fake = _FakeSystem(delta_free=tall, laplacian_free=(tall.T @ tall).tocsr(), n_samples=2)
    for solver in ("cholmod", "superlu"):
        res = spectrum_of_system(fake, k=2, method="arpack", solver=solver, tol=1e-12, progress=False)
        shifted = [(L + lam * np.eye(N), n, z) for L, n, z in refs]
        assert_matches(res, shifted, 2)
        assert res.block_names == ["free"]
    # the same system through the assembler
    s = sl.assemble(net, X, reluctance=lam)
    res2 = spectrum_of_system(s, k=2, method="arpack", solver="cholmod", tol=1e-12, progress=False)
    np.testing.assert_allclose(res2.smallest, res.smallest, rtol=RTOL)


def test_square_system_paths_agree():
    net = sl.Network.random([2, 9, 7, 1], seed=11, output="sigmoid")
    X = np.random.default_rng(4).uniform(-2, 2, size=(3, 2))
    s = sl.assemble(net, X)
    refs = [(L, None, None) for L in _blocks_of(s.laplacian_free.toarray(), 3)]
    for solver in ("substitution", "cholmod", "superlu", "auto"):
        res = spectrum_of_system(s, k=2, method="arpack", solver=solver, tol=1e-12, progress=False)
        assert_matches(res, refs, 2)
        assert res.block_names == [b.name for b in s.layout.free_blocks]


# ----------------------------------------------------------- diagnostics
def test_neuron_contributions_stability_and_summary():
    net = sl.Network.random([2, 30, 1], seed=0)
    X = sl.tasks.paraboloid(20, seed=1)[0]
    res = sl.spectrum(net, X)
    name, C = res.neuron_contributions()
    assert name == res.dominant_block()
    np.testing.assert_allclose(C.sum(axis=1), 1.0, atol=1e-12)
    V = res.vectors_smallest[:, 0]
    sl_ = dict(res.blocks)[name]
    np.testing.assert_allclose(C, V[:, sl_] ** 2 / np.sum(V[:, sl_] ** 2, axis=1, keepdims=True), atol=1e-14)
    pairs = [abs(V[i] @ V[j]) for i in range(20) for j in range(20) if i != j]
    assert res.stability() == pytest.approx(np.mean(pairs), rel=1e-12)
    st_ = res.summary()["lambda_min"]
    lm = res.lambda_min
    assert st_["median"] == pytest.approx(np.median(lm))
    assert st_["iqr"] == pytest.approx(np.percentile(lm, 75) - np.percentile(lm, 25))
    assert st_["std"] == pytest.approx(np.std(lm))
    assert "lambda_min" in res.table() and "z2" in res.table()
    with pytest.raises(ValueError, match="no block"):
        res.neuron_contributions(block="a7")


# ----------------------------------------------------- the paper's claims
PARABOLOID_50 = None


def paraboloid_50():
    return sl.tasks.make("paraboloid", 300, 100, seed=42).X_train[:50]


def test_lambda1_decreases_with_depth_at_he_initialisation():
    X = paraboloid_50()
    medians = [np.median(sl.spectrum(sl.Network.random(d, seed=42), X, vectors=False).lambda_min)
               for d in ([2, 30, 1], [2, 10, 8, 1], [2, 8, 6, 4, 1])]
    assert medians[0] > medians[1] > medians[2] > 0


@pytest.mark.parametrize("dims,seed", [([2, 30, 1], 42), ([2, 30, 1], 0), ([2, 50, 1], 1), ([2, 30, 3], 0)])
def test_fiedler_vector_concentrates_on_output_preactivation_for_shallow_networks(dims, seed):
    res = sl.spectrum(sl.Network.random(dims, seed=seed), paraboloid_50())
    assert res.dominant_block("smallest") == "z2"
    E = res.block_energy("smallest").mean(axis=0)
    n_out = dims[-1]
    # far above its share of coordinates
    assert E[-1] > 5 * n_out / res.vectors_smallest.shape[2]


# ------------------------------------------------------------- tracking
def test_tracker_with_a_fake_info_object():
    net = sl.Network.random([2, 8, 1], seed=0)
    X = np.random.default_rng(0).uniform(-2, 2, size=(10, 2))
    tr = sl.SpectralTracker(every=2)
    for step in range(5):
        tr(SimpleNamespace(method="sheaf", epoch=step, step=step, network=net, X=X, state=None, history=None))
    assert [r["step"] for r in tr.records] == [0, 2, 4]
    ref = sl.spectrum(net, X)
    steps, med = tr.series("lambda_min", "median")
    np.testing.assert_allclose(med, np.median(ref.lambda_min))
    np.testing.assert_allclose(tr.records[0]["energy_min"], ref.block_energy().mean(axis=0))
    with pytest.raises(ValueError, match="every"):
        sl.SpectralTracker(every=0)


def test_tracker_during_sheaf_training_and_sgd():
    X, Y = sl.tasks.paraboloid(20, seed=0)
    net = sl.Network.random([2, 6, 1], seed=0)
    trs = sl.SpectralTracker(every=1)
    fit = sl.train(net, X, Y, steps=300, epoch_steps=100, progress=False, callback=trs, callback_every=1)
    assert len(trs.records) == 3 and {r["method"] for r in trs.records} == {"sheaf"}
    last = sl.spectrum(fit.network, X)
    assert trs.records[-1]["lambda_min"]["median"] == pytest.approx(np.median(last.lambda_min), rel=1e-12)
    trg = sl.SpectralTracker(X=X[:5], every=1)
    sl.sgd(net, X, Y, epochs=20, progress=False, callback=trg, callback_every=10)
    assert len(trg.records) >= 1 and trg.records[0]["method"] == "sgd"


# ------------------------------------------------------------- bad input
def test_bad_input():
    net = sl.Network.random([2, 3, 1], seed=0)
    with pytest.raises(ValueError, match="empty"):
        sl.spectrum(net, np.empty((0, 2)))
    with pytest.raises(ValueError, match="N=7"):
        sl.spectrum(net, np.ones(2), k=8)
    with pytest.raises(ValueError, match="ARPACK"):
        sl.spectrum(net, np.ones(2), k=7, method="arpack")
    with pytest.raises(ValueError, match="system"):
        sl.spectrum(net, np.ones(2), system="full")
    with pytest.raises(ValueError, match="method"):
        sl.spectrum(net, np.ones(2), method="lapack")
    with pytest.raises(TypeError, match="integer"):
        sl.spectrum(net, np.ones(2), k=1.5)
    with pytest.raises(ValueError, match="k must be at least 1"):
        sl.spectrum(net, np.ones(2), k=0)
    with pytest.raises(ValueError, match="NaN"):
        sl.spectrum(net, [np.nan, 1.0])
    with pytest.raises(ValueError, match="full=True"):
        sl.spectrum(net, np.ones(2), full=True, method="arpack")
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises((TypeError, ValueError), match="threads"):
            sl.spectrum(net, np.ones(2), threads=bad)
    # the kernels do not check bounds: the operator refuses vectors that would overrun them
    op = CoboundaryOperator(net, net.activation_pattern(np.ones(2)))
    v = np.ones(op.n)
    for bad in ((v, np.empty(op.n - 1)), (v[:-1], np.empty(op.n)), (v, np.empty(op.n, dtype=np.float32)),
                (v, np.empty(2 * op.n)[::2])):
        with pytest.raises(ValueError, match="contiguous float64 vectors"):
            op.apply_pair(bad, None)
        with pytest.raises(ValueError, match="contiguous float64 vectors"):
            op.apply_pair(None, bad)
    frozen = np.empty(op.n)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        op.apply_pair((v, frozen), None)
    with pytest.raises(ValueError, match="length"):
        op.laplacian_matvec(np.ones(op.n + 1))


def test_arpack_non_convergence_is_reported_with_the_residual():
    net = sl.Network.random([2, 60, 60, 1], seed=0)
    with pytest.raises(SpectrumConvergenceError) as info:
        sl.spectrum(net, np.ones((1, 2)), k=3, method="arpack", maxiter=1, ncv=8, tol=1e-14, progress=False)
    err = info.value
    assert err.sample == 0 and err.which in ("smallest", "largest")
    assert "did not converge" in str(err) and "residual" in str(err)
    assert err.tol == 1e-14
    assert np.isfinite(err.residual) and err.residual > 1e-14
    assert f"{err.residual:.3e}" in str(err)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_falls_back_to_the_serial_kernels():
    # GNU OpenMP cannot start threads in a child forked after its threads ran:
    # numba would kill the child; the child uses the serial kernels instead
    net = sl.Network.random([2, 300, 300, 1], seed=0)
    x = np.ones((1, 2))
    parent = sl.spectrum(net, x, method="arpack", threads=2, progress=False)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            child = sl.spectrum(net, x, method="arpack", threads=2, progress=False)
            os.write(write, child.lambda_min.tobytes() + child.lambda_max.tobytes())
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    data = os.read(read, 16)
    os.close(read)
    assert status == 0
    np.testing.assert_array_equal(np.frombuffer(data, dtype=np.float64),
                                  np.r_[parent.lambda_min, parent.lambda_max])
