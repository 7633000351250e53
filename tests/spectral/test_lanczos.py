"""The plain Lanczos recurrence for the largest eigenpair (spectral/lanczos.py) against dense eigh."""

import numpy as np
import pytest
import scipy.sparse.linalg as spla
from hypothesis import given, settings, strategies as st

from helpers.random_graphs import random_graph, random_inputs
import sheaflinalg as sl
from sheaflinalg.spectral.operators import graph_systems as graph_spectrum
from sheaflinalg.spectral.arpack_pair import largest_pairs
from sheaflinalg.spectral.lanczos import LargestLanczos


def _run(A, tol=1e-10, maxiter=None, v0=None):
    n = A.shape[0]
    problem = LargestLanczos(n, tol, maxiter, np.ones(n) if v0 is None else v0)
    products = 0
    while (request := problem.request()) is not None:
        x, y = request
        y[:] = A @ x
        products += 1
    w, V = problem.result()
    return w[0], V[:, 0], products


def _clustered(n, gap, seed):
    """A symmetric positive definite matrix whose two largest eigenvalues are ``gap`` apart relatively."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    w = np.sort(rng.uniform(1e-3, 1.0, n))
    w[-1], w[-2] = 1.0 + gap, 1.0
    return (Q * w) @ Q.T


@settings(max_examples=8, deadline=None)
@given(n=st.integers(30, 100), gap=st.sampled_from([1e-1, 1e-3, 1e-5]), seed=st.integers(0, 10**6))
def test_largest_eigenpair_matches_dense_eigh(n, gap, seed):
    A = _clustered(n, gap, seed)
    w, V = np.linalg.eigh(A)
    theta, v, _ = _run(A, v0=np.random.default_rng(seed + 1).standard_normal(n))
    np.testing.assert_allclose(theta, w[-1], rtol=1e-12)
    assert np.linalg.norm(A @ v - theta * v) <= 100 * 1e-10 * theta
    np.testing.assert_allclose(np.linalg.norm(v), 1.0, rtol=1e-12)


def test_the_rebuilt_vector_is_the_ritz_vector_and_costs_one_recurrence_more():
    A = _clustered(120, 1e-3, 7)
    theta, v, products = _run(A)
    steps = (products - 1 + 1) // 2          # build m products, replay m - 1, check 1
    assert products == 2 * steps
    # the Rayleigh quotient of the rebuilt vector is the Ritz value
    np.testing.assert_allclose(v @ A @ v, theta, rtol=1e-13)


def test_an_invariant_start_vector_stops_at_once():
    A = np.diag([1.0, 2.0, 5.0])
    theta, v, products = _run(A, v0=np.array([0.0, 0.0, 3.0]))
    assert theta == 5.0 and products == 2 and abs(v[2]) == 1.0


def test_no_convergence_within_the_cap_raises_arpack_no_convergence():
    A = _clustered(100, 1e-7, 3)
    with pytest.raises(spla.ArpackNoConvergence):
        _run(A, tol=1e-10, maxiter=1)


def test_lockstep_with_arpack_gives_both_ends():
    A = _clustered(80, 1e-2, 11)
    Ainv = np.linalg.inv(A)

    def apply_batch(a, b):
        for M, requests in ((A, a), (Ainv, b)):
            for _, x, y in requests:
                y[:] = M @ x
    ((wl, _), (mu, _)), = largest_pairs(apply_batch, 80, 1, 1, tol=1e-10, v0=np.ones(80), lanczos=True)
    w = np.linalg.eigvalsh(A)
    np.testing.assert_allclose([wl[0], 1.0 / mu[0]], [w[-1], w[0]], rtol=1e-10)


def test_graph_spectrum_by_lanczos_matches_dense_eigh(monkeypatch):
    net = random_graph(3, "mixed", "identity")
    X = random_inputs(net, 2, 5, "mixed")
    dense = sl.spectrum(net, X, method="dense", progress=False)
    monkeypatch.setattr(graph_spectrum, "LANCZOS_MIN", 1)
    sp = sl.spectrum(net, X, method="arpack", progress=False, tol=1e-10)
    np.testing.assert_allclose(sp.lambda_max, dense.lambda_max, rtol=1e-10)
    np.testing.assert_allclose(sp.lambda_min, dense.lambda_min, rtol=1e-9)
    assert np.all(sp.residuals[:, 1] <= 100 * 1e-10)


def test_graph_spectrum_by_lanczos_is_the_same_for_any_thread_count(monkeypatch):
    net = random_graph(5, "mixed", "identity")
    X = random_inputs(net, 3, 3, "mixed")
    monkeypatch.setattr(graph_spectrum, "LANCZOS_MIN", 1)
    one, four = (sl.spectrum(net, X, method="arpack", progress=False, threads=t) for t in (1, 4))
    np.testing.assert_array_equal(one.lambda_max, four.lambda_max)
    np.testing.assert_array_equal(one.vectors_largest, four.vectors_largest)
    np.testing.assert_array_equal(one.lambda_min, four.lambda_min)


def test_the_eigenvalue_alone_is_the_same_in_half_the_products():
    """Without the eigenvector the recurrence stops where it converged: the same value bit for bit, no replay,
    and the Ritz estimate that stopped it as the residual."""
    A = _clustered(120, 1e-3, 5)
    theta, _, products = _run(A)
    problem = LargestLanczos(120, 1e-10, None, np.ones(120), vector=False)
    alone = 0
    while (request := problem.request()) is not None:
        request[1][:] = A @ request[0]
        alone += 1
    w, V, estimate = problem.result()
    assert w[0] == theta and V is None and alone == products // 2 and 0 <= estimate <= 1e-10
    np.testing.assert_allclose(theta, np.linalg.eigvalsh(A)[-1], rtol=1e-12)


@pytest.mark.parametrize("mode", ["mixed", "active", "dead", "ties"])
def test_graph_spectrum_without_vectors_matches_dense_eigh_in_fewer_products(mode, monkeypatch):
    net = random_graph(4, mode, "identity", steps=("conv", "maxpool", "relu", "residual"), branching=True)
    X = random_inputs(net, 4, 2, mode)
    dense = sl.spectrum(net, X, method="dense", progress=False)
    monkeypatch.setattr(graph_spectrum, "LANCZOS_MIN", 1)
    with_vectors = sl.spectrum(net, X, method="arpack", progress=False, tol=1e-10)
    alone = sl.spectrum(net, X, method="arpack", progress=False, tol=1e-10, vectors=False)
    assert alone.lambda_max.tobytes() == with_vectors.lambda_max.tobytes()
    assert alone.lambda_min.tobytes() == with_vectors.lambda_min.tobytes()
    assert alone.vectors_largest is None and alone.n_operator < with_vectors.n_operator
    np.testing.assert_allclose(alone.lambda_max, dense.lambda_max, rtol=1e-10)
    np.testing.assert_allclose(alone.lambda_min, dense.lambda_min, rtol=1e-9)
    assert np.all(alone.residuals[:, 1] <= 1e-10)


def test_one_large_system_shows_its_lanczos_steps(monkeypatch, capsys):
    """One image of a large network is one group: the bar counts the Lanczos steps (the groups' bar would
    stand still for minutes); the result is the same as without it."""
    net = random_graph(6, "mixed", "identity")
    X = random_inputs(net, 6, 1, "mixed")
    monkeypatch.setattr(graph_spectrum, "LANCZOS_MIN", 1)
    import sheaflinalg.spectral.drivers as drivers
    monkeypatch.setattr(drivers, "LANCZOS_MIN", 1)
    quiet = sl.spectrum(net, X, method="arpack", progress=False)
    capsys.readouterr()
    shown = sl.spectrum(net, X, method="arpack", progress=True)
    err = capsys.readouterr().err
    assert "spectrum" in err and "step" in err, err
    assert shown.lambda_max.tobytes() == quiet.lambda_max.tobytes()
