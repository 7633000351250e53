"""Certificates, the Cholesky backends and the ``sheaflinalg verify`` command."""

import importlib

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.strategies import networks
import sheaflinalg as sl
from sheaflinalg.sheaf.assembled import factor
from sheaflinalg.cli import main
from sheaflinalg.sheaf.verification.verify import EXIT_STATUS, unit_lower_triangular_certificate


@given(networks())
def test_every_certificate_passes_on_random_networks(case):
    net, seed = case
    X = np.random.default_rng(seed).uniform(-2, 2, size=(3, net.dims[0]))
    report = sl.verify(net, X)
    assert report.passed, str(report)
    assert np.all(np.abs(report.logdet_laplacian) < 1e-8)
    assert np.all(report.det_certificate)


def test_certificate_rejects_what_it_must():
    ok, _ = unit_lower_triangular_certificate(sp.csr_matrix(np.array([[1.0, 0], [-3.0, 1.0]])))
    assert ok
    for bad, why in [(np.array([[1.0, 1e-300], [0, 1.0]]), "above the diagonal"),
                     (np.array([[1.0, 0], [2.0, 1.0 + 2**-52]]), "not exactly 1.0"),
                     (np.ones((2, 3)), "not square")]:
        ok, reason = unit_lower_triangular_certificate(sp.csr_matrix(bad))
        assert not ok and why in reason


def test_report_fails_when_a_check_fails():
    net = sl.Network.random([2, 5, 1], seed=0)
    report = sl.verify(net, np.ones((2, 2)))
    assert report.passed
    report.max_deviation[1] = 1.0  # as if the harmonic extension were wrong for sample 1
    assert not report.passed
    assert "FAILED" in str(report)


def test_nonlinear_output_note():
    report = sl.verify(sl.Network.random([2, 4, 3], seed=0, output="softmax"), np.ones((2, 2)))
    assert report.passed and "-J_phi(z*)" in str(report)


def test_superlu_and_cholmod_agree_and_missing_cholmod_warns_once(monkeypatch, rng):
    net = sl.Network.random([3, 8, 6, 2], seed=4)
    L = sl.assemble(net, rng.normal(size=3)).laplacian_free
    b = rng.normal(size=L.shape[0])
    slu = factor.cholesky(L, backend="superlu")
    x = slu.solve(b)
    np.testing.assert_allclose(L @ x, b, rtol=1e-10, atol=1e-10)
    dense_logdet = np.linalg.slogdet(L.toarray())[1]
    assert abs(slu.logdet() - dense_logdet) < 1e-9
    if factor.cholmod_available():
        chol = factor.cholesky(L, backend="cholmod")
        assert chol.backend == "cholmod"
        np.testing.assert_allclose(chol.solve(b), x, rtol=1e-9, atol=1e-10)
        assert abs(chol.logdet() - dense_logdet) < 1e-9
    monkeypatch.setattr(factor, "_cholmod", None)
    monkeypatch.setattr(factor, "_warned", False)
    with pytest.warns(RuntimeWarning, match="SuperLU"):
        f = factor.cholesky(L)
    assert f.backend == "superlu"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        factor.cholesky(L)  # the warning is given once only
    with pytest.raises(ImportError, match="scikit-sparse"):
        factor.cholesky(L, backend="cholmod")
    report = sl.verify(net, rng.normal(size=(2, 3)))
    assert report.passed and report.factor_backend == "superlu"


def test_factor_refuses_bad_input():
    with pytest.raises(ValueError, match="unknown backend"):
        factor.cholesky(sp.identity(2), backend="magic")
    with pytest.raises(np.linalg.LinAlgError):
        factor.cholesky(-sp.identity(2, format="csc"), backend="superlu")


def test_cli_verify_defaults_and_options(tmp_path, capsys):
    assert main(["verify"]) == 0
    out = capsys.readouterr().out
    assert "[2, 30, 1]" in out and "50 samples" in out and "RESULT: PASSED" in out
    net = sl.Network.random([3, 6, 2], seed=1, output="sigmoid")
    net.save(tmp_path / "n.npz")
    assert main(["verify", "--network", str(tmp_path / "n.npz"), "--samples", "4"]) == 0
    assert "output sigmoid" in capsys.readouterr().out
    assert main(["verify", "--arch", "2,3,3,1", "--seed", "3", "--output", "tanh", "--samples", "2"]) == 0
    assert main(["verify", "--output", "relu"]) == 2
    assert "unknown output activation" in capsys.readouterr().err
    assert main(["verify", "--arch", "2,x"]) == 2


def test_cli_verify_exit_status_1_when_a_check_fails(monkeypatch, capsys):
    original = sl.verify

    def broken(*args, **kwargs):
        report = original(*args, **kwargs)
        report.det_certificate[0] = False
        report.certificate_reason[0] = "simulated failure"
        return report

    monkeypatch.setattr(sl, "verify", broken)
    assert main(["verify", "--samples", "3"]) == 1
    assert "simulated failure" in capsys.readouterr().out


# ------------------------------------------------------------------ the third verdict: INCONCLUSIVE
def _scaled(net, factor):
    return net.replace(weights=[W * factor for W in net.weights])


@pytest.mark.parametrize("make, X, expected", [
    # det delta_Omega = 1 holds by structure in all three
    (lambda: sl.Network.random([2, 4, 1], seed=0), np.full((2, 2), 1e300), {"PASSED"}),
    (lambda: _scaled(sl.Network.random([2, 4, 1], seed=0), 1e150), np.ones((3, 2)), {"INCONCLUSIVE"}),
    (lambda: sl.Network([[[1.0]], [[1e8]]], [[0.0], [0.0]]), [[1.0], [2.0]], {"INCONCLUSIVE"}),
])
def test_float64_limits_never_read_as_failed(make, X, expected):
    report = sl.verify(make(), X)
    assert report.status in expected, str(report)
    assert np.all(report.det_certificate) and np.all(report.checks["harmonic = forward"])
    if report.status == "INCONCLUSIVE":
        text = str(report)
        assert "rounding-error bound" in text and "condition number" in text and "FAILED" not in text


@given(networks(), st.floats(1e-3, 1e3), st.floats(1e-3, 1e3))
def test_honest_networks_at_ordinary_scales_pass(case, weight_scale, input_scale):
    net, seed = case
    net = _scaled(net, weight_scale ** (1 / len(net.weights)))
    X = np.random.default_rng(seed).uniform(-input_scale, input_scale, size=(3, net.dims[0]))
    report = sl.verify(net, X)
    assert report.status == "PASSED", str(report)
    assert not any(np.any(u) for u in report.inconclusive.values())


def _corrupting(monkeypatch, index, relative):
    """A test double of the harmonic extension that is wrong in one coordinate of sample 0."""
    verify_module = importlib.import_module("sheaflinalg.sheaf.verification.verify")   # sl.sheaf.verify is the function
    genuine = verify_module.harmonic_extension

    def corrupted(net, X):
        h = genuine(net, X)
        free = h.free.copy()
        j = index % free.shape[1]      # wrong by more than tol relative to the sample's largest value
        free[0, j] += relative * max(1.0, np.abs(free[0]).max())
        return sl.HarmonicExtension(free, h.output, h.pattern, h.self_consistent, h.layout)

    monkeypatch.setattr(verify_module, "harmonic_extension", corrupted)


@given(networks(), st.integers(0, 10**6), st.floats(1e-8, 1e3), st.sampled_from([1.0, 1e8]))
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_wrong_harmonic_extension_reads_failed_however_ill_conditioned(monkeypatch, case, index, relative,
                                                                         weight_scale):
    net, seed = case
    net = net.replace(weights=list(net.weights[:-1]) + [net.weights[-1] * weight_scale])
    X = np.random.default_rng(seed).uniform(-2, 2, size=(2, net.dims[0]))
    with monkeypatch.context() as m:
        _corrupting(m, index, relative)
        report = sl.verify(net, X)
    assert report.status == "FAILED", str(report)
    assert "RESULT: FAILED" in str(report)


def test_verify_command_exit_status_names_the_verdict(tmp_path, capsys):
    path = tmp_path / "n.npz"
    sl.Network([np.ones((1, 2)), np.array([[1e8]])], [np.zeros(1), np.zeros(1)]).save(str(path))
    code = main(["verify", "--network", str(path), "--samples", "4", "--seed", "1"])
    out = capsys.readouterr().out
    status = out.rsplit("RESULT: ", 1)[1].strip()
    assert code == EXIT_STATUS[status] and EXIT_STATUS == {"PASSED": 0, "FAILED": 1, "INCONCLUSIVE": 3}
    assert status == "INCONCLUSIVE", out
