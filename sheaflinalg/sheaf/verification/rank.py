"""Certificates that a (tall) sparse matrix has full column rank.

Two ways, tried in this order:

* **structural** (exact): the rows contain a square unit lower triangular
  block, i.e. for every column ``j`` a distinct row whose last nonzero entry
  sits in column ``j`` and is exactly ``1.0``.  Those rows, ordered by ``j``,
  form a block of determinant 1, so the columns are independent.  Only
  equality tests on the stored entries are involved: no rounding.
* **numerical**: ``lambda_min`` of the Gram matrix ``A^T A`` (dense for a few
  columns, else shift-invert Lanczos on a sparse Cholesky factor), compared
  with a first-order rounding bound ``(k + n) eps ||A||_F^2`` (``k`` the most
  nonzeros of a column, ``n`` the columns): forming ``A^T A`` perturbs it by
  at most ``k eps |A|^T |A|``, a backward-stable eigensolver by ``n eps
  ||A^T A||_2``, and both norms are below ``||A||_F^2``.  The rank is
  certified only when ``lambda_min`` exceeds the bound.

The paper's encoding of skip connections (``skip_encoding="edges"``) makes
``delta_Omega`` tall; its least-squares harmonic extension is unique exactly
when ``delta_Omega`` has full column rank.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..assembled.factor import check_backend, cholesky

#: Up to this many columns the Gram matrix's eigenvalues are computed densely.
DENSE_COLUMNS = 400


@dataclass(frozen=True)
class RankCertificate:
    """The verdict of :func:`rank_certificate`.

    Attributes
    ----------
    shape : tuple of int
    method : {"structural", "numerical", "shape"}
        How the verdict was reached (``"shape"``: fewer rows than columns).
    certified : bool
        Full column rank is proven (structural) or above the rounding bound (numerical).
    lambda_min : float
        Smallest eigenvalue of ``A^T A`` (``nan`` when not computed: structural or shape, or when
        the sparse Cholesky factorisation of ``A^T A`` broke down).
    bound : float
        Rounding bound on ``lambda_min`` (``nan`` when not computed).
    rows : ndarray of int or None
        Structural: the rows of the unit lower triangular block, one per column.
    reason : str
        Why the certificate was not given (empty when certified).
    """

    shape: tuple
    method: str
    certified: bool
    lambda_min: float = float("nan")
    bound: float = float("nan")
    rows: np.ndarray = None
    reason: str = ""

    @property
    def status(self):
        """``"PASSED"`` when certified, else ``"FAILED"``."""
        return "PASSED" if self.certified else "FAILED"

    @property
    def sigma_min(self):
        """Smallest singular value, ``sqrt(max(lambda_min, 0))`` (``nan`` when not computed)."""
        return float(np.sqrt(max(self.lambda_min, 0.0))) if np.isfinite(self.lambda_min) else float("nan")

    def __str__(self):
        m, n = self.shape
        if self.method == "structural":
            return f"{m} x {n}: full column rank, structural (a unit lower triangular {n} x {n} block): PASSED"
        if self.method == "shape":
            return f"{m} x {n}: {self.reason}: FAILED"
        verdict = ">" if self.certified else "<="
        return (f"{m} x {n}: numerical, lambda_min(A^T A) = {self.lambda_min:.3e} {verdict} rounding bound "
                f"{self.bound:.3e}: {self.status}")


def _as_sparse(matrix, name):
    """``matrix`` as a CSR float64 matrix with sorted indices and no stored zeros; ValueError if it is
    not a finite real 2-D matrix."""
    if sp.issparse(matrix):
        A = sp.csr_matrix(matrix)
    else:
        try:
            dense = np.asarray(matrix)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be a 2-D array or scipy.sparse matrix, got {type(matrix).__name__}") from exc
        if dense.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got shape {dense.shape}")
        A = sp.csr_matrix(dense) if dense.dtype.kind in "biuf" else None
    if A is None or A.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {(A if A is not None else dense).dtype}")
    A = A.astype(np.float64)
    if not np.all(np.isfinite(A.data)):
        raise ValueError(f"{name} holds NaN or Inf")
    A.sum_duplicates()
    A.eliminate_zeros()
    A.sort_indices()
    return A


def unit_triangular_rows(A):
    """Rows of the CSR matrix ``A`` (sorted indices, no stored zeros) forming a unit lower triangular
    square block: for each column ``j`` the first row whose last nonzero is exactly 1.0 in column ``j``;
    ``None`` if some column has no such row.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> unit_triangular_rows(sp.csr_matrix([[1.0, 0.0], [2.0, 0.0], [-3.0, 1.0]]))
    array([0, 2])
    >>> unit_triangular_rows(sp.csr_matrix([[2.0, 0.0], [0.0, 1.0]])) is None
    True
    """
    n_rows, n_cols = A.shape
    filled = np.flatnonzero(np.diff(A.indptr) > 0)
    last = A.indptr[filled + 1] - 1
    unit = A.data[last] == 1.0
    rows, cols = filled[unit], A.indices[last[unit]]
    present, first = np.unique(cols, return_index=True)   # first occurrence: the lowest row per column
    if present.size != n_cols:
        return None
    return rows[first].astype(np.int64)


def _lambda_min(A, backend):
    """Smallest eigenvalue of ``A^T A`` (``nan`` when its Cholesky factorisation breaks down)."""
    G = (A.T @ A).tocsc()
    n = G.shape[0]
    if n <= DENSE_COLUMNS:
        return float(np.linalg.eigvalsh(G.toarray())[0])
    try:
        factor = cholesky(G, backend=backend)
    except np.linalg.LinAlgError:
        return float("nan")
    inverse = spla.LinearOperator((n, n), matvec=factor.solve, dtype=np.float64)
    start = np.ones(n)   # a fixed start vector: the same answer on every run
    value = spla.eigsh(G, k=1, sigma=0.0, which="LM", OPinv=inverse, v0=start, return_eigenvectors=False)
    return float(value[0])


def rank_certificate(matrix, backend="auto", name="matrix"):
    """Certify that ``matrix`` (m x n, m >= n) has full column rank n.

    Parameters
    ----------
    matrix : scipy.sparse matrix or array_like, 2-D
    backend : {"auto", "cholmod", "superlu"}
        Sparse Cholesky backend of the numerical certificate (more than
        :data:`DENSE_COLUMNS` columns).
    name : str
        Used in error messages.

    Returns
    -------
    RankCertificate

    Examples
    --------
    >>> import numpy as np
    >>> rank_certificate(np.array([[1.0, 0.0], [-2.0, 1.0], [0.0, 1.0]])).method
    'structural'
    >>> c = rank_certificate(np.array([[2.0, 1.0], [1.0, 2.0], [1.0, 1.0]]))
    >>> c.method, c.status
    ('numerical', 'PASSED')
    >>> rank_certificate(np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])).status
    'FAILED'
    """
    check_backend(backend)
    A = _as_sparse(matrix, name)
    m, n = A.shape
    if m < n:
        return RankCertificate((m, n), "shape", False, reason=f"fewer rows ({m}) than columns ({n})")
    rows = unit_triangular_rows(A)
    if rows is not None:
        return RankCertificate((m, n), "structural", True, rows=rows)
    eps = np.finfo(np.float64).eps
    per_column = int(np.max(np.bincount(A.indices, minlength=n)))
    with np.errstate(over="ignore"):
        bound = (per_column + n) * eps * float(np.sum(A.data * A.data))
        lam = _lambda_min(A, backend)
    certified = bool(lam > bound)
    if certified:
        reason = ""
    elif np.isnan(lam):
        reason = "A^T A is not positive definite to working precision (its Cholesky factorisation broke down)"
    else:
        reason = f"lambda_min(A^T A) = {lam:.3e} is not above the rounding bound {bound:.3e}"
    return RankCertificate((m, n), "numerical", certified, lambda_min=lam, bound=bound, reason=reason)
