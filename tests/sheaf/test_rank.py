"""The full-column-rank certificate of sheaf/verification/rank.py against numpy.linalg.matrix_rank."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from sheaflinalg.sheaf.verification import rank
from sheaflinalg.sheaf.verification.rank import rank_certificate, unit_triangular_rows


@st.composite
def tall_sparse(draw, max_cols=12):
    """A random sparse m x n matrix (m >= n), optionally made rank deficient on purpose."""
    n = draw(st.integers(1, max_cols))
    m = draw(st.integers(n, 2 * n + 3))
    seed = draw(st.integers(0, 2**31 - 1))
    density = draw(st.sampled_from([0.2, 0.5, 1.0]))
    kind = draw(st.sampled_from(["random", "unit_triangular", "dependent_column", "zero_column", "integer"]))
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(m, n)) * (rng.random((m, n)) < density)
    if kind == "integer":
        A = np.round(A * 2)
    if kind == "unit_triangular":   # a unit lower triangular block hidden among other rows
        T = np.tril(rng.normal(size=(n, n)), -1) + np.eye(n)
        A[rng.permutation(m)[:n]] = T
    if kind == "dependent_column" and n >= 2:
        i, j = rng.choice(n, 2, replace=False)
        A[:, j] = rng.normal() * A[:, i]
    if kind == "zero_column":
        A[:, rng.integers(n)] = 0.0
    return A, kind


def _dense_triangular_check(A, rows):
    """The naive meaning of a structural certificate: rows[j] ends with an exact 1.0 at column j."""
    block = A[rows]
    return np.array_equal(np.triu(block, 1), np.zeros_like(block)) and np.all(np.diag(block) == 1.0)


@given(tall_sparse())
def test_certificate_agrees_with_matrix_rank(case):
    A, kind = case
    n = A.shape[1]
    cert = rank_certificate(sp.csr_matrix(A))
    numpy_rank = np.linalg.matrix_rank(A)
    if cert.certified:      # sound: never certifies a matrix numpy finds rank deficient
        assert numpy_rank == n
    if kind in ("dependent_column", "zero_column") and n >= 2 or np.all(A == 0):
        assert not cert.certified and numpy_rank < n
    if cert.method == "structural":
        assert _dense_triangular_check(A, cert.rows)
        assert np.linalg.det(A[cert.rows]) == pytest.approx(1.0)
    if kind == "unit_triangular":
        assert cert.method == "structural" and cert.certified
    # complete where rounding cannot matter: well-conditioned full-rank matrices are certified
    s = np.linalg.svd(A, compute_uv=False)
    if s[-1] > 1e-6 * s[0]:
        assert cert.certified


@given(tall_sparse())
def test_dense_and_sparse_inputs_agree(case):
    A, _ = case
    a, b = rank_certificate(A), rank_certificate(sp.coo_matrix(A))
    assert (a.method, a.certified) == (b.method, b.certified)
    assert np.array_equal(a.lambda_min, b.lambda_min, equal_nan=True)


def test_structural_rows_skip_non_unit_and_right_entries():
    # row 0 ends with 2.0 (not unit), row 1 ends at column 1; row 2 gives column 0, row 3 column 1
    A = sp.csr_matrix(np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 0.0], [5.0, 1.0]]))
    assert list(unit_triangular_rows(A)) == [2, 1]
    assert unit_triangular_rows(sp.csr_matrix(np.array([[1.0, 1.0], [1.0, 1.0]]))) is None


def test_explicit_zeros_do_not_hide_a_certificate():
    A = sp.csr_matrix((np.array([1.0, 0.0, 1.0]), np.array([0, 1, 1]), np.array([0, 2, 3])), shape=(2, 2))
    assert rank_certificate(A).method == "structural"


@pytest.mark.parametrize("backend", ["auto", "superlu"])
def test_sparse_numerical_path(monkeypatch, backend):
    monkeypatch.setattr(rank, "DENSE_COLUMNS", 5)
    A = sp.csr_matrix(sp.random(80, 40, density=0.1, random_state=1) + sp.eye(80, 40) * 2.0)
    A.data[A.data == 1.0] = 1.5      # no exact unit entries: the structural certificate cannot apply
    cert = rank_certificate(A, backend=backend)
    assert cert.method == "numerical" and cert.certified
    lam = np.linalg.eigvalsh((A.T @ A).toarray())[0]
    assert cert.lambda_min == pytest.approx(lam, rel=1e-8)
    D = A.tolil()
    D[:, 7] = D[:, 3] * -2.0
    dependent = rank_certificate(D, backend=backend)
    assert not dependent.certified and np.linalg.matrix_rank(D.toarray()) < 40
    assert "rounding bound" in dependent.reason or "Cholesky" in dependent.reason


def test_wide_matrix_fails_by_shape():
    cert = rank_certificate(np.ones((2, 3)))
    assert cert.method == "shape" and not cert.certified and "fewer rows" in str(cert)


@pytest.mark.parametrize("bad, error, text", [
    (np.array([[1.0, np.nan]]), ValueError, "NaN or Inf"),
    (np.ones(3), ValueError, "2-D"),
    (np.array([["a"]]), TypeError, "real numbers"),
    (np.ones((2, 2), dtype=complex), TypeError, "real numbers"),
])
def test_bad_input_is_refused(bad, error, text):
    with pytest.raises(error, match=text):
        rank_certificate(bad)


def test_unknown_backend_is_refused_before_work():
    with pytest.raises(ValueError, match="unknown backend"):
        rank_certificate(np.eye(2), backend="dense")
