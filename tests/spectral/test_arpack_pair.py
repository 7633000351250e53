"""The lockstep ARPACK driver against scipy's eigsh on the same problems."""

import numpy as np
import pytest
import scipy.sparse.linalg as spla

from sheaflinalg.spectral import arpack_pair
from sheaflinalg.spectral.arpack_pair import ArpackNotConverged, largest_pair


def spd(n, seed, spread=1.0):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return (Q * rng.uniform(1.0, 1.0 + spread, n)) @ Q.T


def pair_of(A, B, log=None):
    def apply_pair(a, b):
        if log is not None:
            log.append((a is not None, b is not None))
        for M, request in ((A, a), (B, b)):
            if request is not None:
                x, y = request
                y[:] = M @ x
    return apply_pair


def test_scipy_offers_the_reverse_communication_path():
    # the fast path: if a SciPy upgrade removes it, the results stay right (fallback) but slower
    assert arpack_pair.REVERSE_COMMUNICATION


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("lockstep", [True, False])
def test_lockstep_gives_eigsh_results(monkeypatch, k, lockstep):
    monkeypatch.setattr(arpack_pair, "REVERSE_COMMUNICATION", lockstep and arpack_pair.REVERSE_COMMUNICATION)
    n = 120
    A, B = spd(n, 0, spread=3.0), spd(n, 1, spread=0.5)
    v0 = np.random.default_rng(2).standard_normal(n)
    (wa, Va), (wb, Vb) = largest_pair(pair_of(A, B), n, k, tol=1e-10, ncv=12, v0=v0)
    for M, w, V in ((A, wa, Va), (B, wb, Vb)):
        we, Ve = spla.eigsh(spla.aslinearoperator(M), k=k, which="LA", tol=1e-10, ncv=12, v0=v0)
        np.testing.assert_allclose(w, we, rtol=1e-13)
        np.testing.assert_allclose(np.abs(V.T @ Ve), np.eye(k), atol=1e-8)
        exact = np.linalg.eigvalsh(M)[::-1][:k]
        np.testing.assert_allclose(np.sort(w)[::-1], exact, rtol=1e-10)


@pytest.mark.parametrize("lockstep", [True, False])
def test_a_pair_of_ncv_gives_each_problem_its_own(monkeypatch, lockstep):
    monkeypatch.setattr(arpack_pair, "REVERSE_COMMUNICATION", lockstep and arpack_pair.REVERSE_COMMUNICATION)
    n = 120
    A, B = spd(n, 3, spread=3.0), spd(n, 4, spread=0.5)
    v0 = np.random.default_rng(5).standard_normal(n)
    (wa, _), (wb, _) = largest_pair(pair_of(A, B), n, 1, tol=1e-10, ncv=(30, 8), v0=v0)
    for M, w, ncv in ((A, wa, 30), (B, wb, 8)):
        we = spla.eigsh(spla.aslinearoperator(M), k=1, which="LA", tol=1e-10, ncv=ncv, v0=v0,
                        return_eigenvectors=False)
        assert w.tolist() == we.tolist()        # the same iterations as eigsh with that ncv


def test_both_problems_are_served_in_the_same_calls_until_one_converges():
    n = 80
    A = np.diag(np.r_[100.0, np.ones(n - 1)])  # one dominant eigenvalue: converges at once
    B = spd(n, 3, spread=0.05)                  # clustered: needs many steps
    log = []
    (wa, _), (wb, _) = largest_pair(pair_of(A, B, log), n, 1, tol=1e-12, ncv=10, v0=np.ones(n))
    assert wa[0] == pytest.approx(100.0, rel=1e-12)
    assert wb[0] == pytest.approx(np.linalg.eigvalsh(B)[-1], rel=1e-10)
    assert log[0] == (True, True)
    both = [i for i, (a, b) in enumerate(log) if a and b]
    assert both == list(range(len(both)))           # served together first ...
    assert all(entry == (False, True) for entry in log[len(both):]) and len(log) > len(both)  # ... then B alone


@pytest.mark.parametrize("lockstep", [True, False])
def test_non_convergence_says_which_problem(monkeypatch, lockstep):
    monkeypatch.setattr(arpack_pair, "REVERSE_COMMUNICATION", lockstep and arpack_pair.REVERSE_COMMUNICATION)
    n = 80
    A = np.diag(np.r_[100.0, np.ones(n - 1)])
    B = spd(n, 3, spread=1e-4)
    with pytest.raises(ArpackNotConverged) as info:
        largest_pair(pair_of(A, B), n, 1, tol=1e-14, ncv=6, maxiter=2, v0=np.ones(n))
    assert info.value.index == 1
    assert isinstance(info.value.cause, spla.ArpackNoConvergence)
