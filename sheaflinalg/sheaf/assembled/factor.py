"""Sparse Cholesky factorisation: CHOLMOD (scikit-sparse) with a SuperLU fallback.

If scikit-sparse is missing, SciPy's SuperLU is used instead and one
``RuntimeWarning`` says so (once per process).
"""

import warnings

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..._common.validation import check_choice

try:  # scikit-sparse builds against Debian's libsuitesparse-dev
    from sksparse import cholmod as _cholmod
except ImportError:  # pragma: no cover - depends on the environment
    _cholmod = None

_warned = False
BACKENDS = ("auto", "cholmod", "superlu")


def cholmod_available():
    """True if scikit-sparse's CHOLMOD can be used."""
    return _cholmod is not None


def resolved_backend(backend):
    """The backend ``"auto"``, ``"cholmod"`` or ``"superlu"`` (checked) resolves to on this machine."""
    return "cholmod" if backend != "superlu" and _cholmod is not None else "superlu"


def check_backend(backend, name="backend"):
    """Return ``backend`` if it names a usable Cholesky backend, else raise; called at the entry of every
    public function that factorises, before any work.

    Examples
    --------
    >>> check_backend("superlu")
    'superlu'
    >>> check_backend("bogus")
    Traceback (most recent call last):
    ...
    ValueError: unknown backend 'bogus'; expected one of 'auto', 'cholmod', 'superlu'
    """
    check_choice(backend, BACKENDS, name)
    if backend == "cholmod" and _cholmod is None:
        raise ImportError(f"{name}='cholmod' needs scikit-sparse (see README: set-up); use 'auto' or 'superlu'")
    return backend


class Factor:
    """A factorisation of a sparse SPD matrix ``A``.

    Attributes
    ----------
    backend : {"cholmod", "superlu"}
    """

    def __init__(self, A, backend="auto"):
        global _warned
        check_backend(backend)
        A = sp.csc_matrix(A, dtype=np.float64)
        if A.shape[0] != A.shape[1]:
            raise ValueError(f"matrix must be square, got shape {A.shape}")
        self.shape = A.shape
        if backend == "auto" and _cholmod is None and not _warned:
            warnings.warn("scikit-sparse (CHOLMOD) is not installed; using SciPy's SuperLU "
                          "for sparse factorisations instead", RuntimeWarning, stacklevel=3)
            _warned = True
        self.backend = "cholmod" if (backend != "superlu" and _cholmod is not None) else "superlu"
        if self.backend == "cholmod":
            try:
                self._factor = _cholmod.cholesky(A)
            except _cholmod.CholmodNotPositiveDefiniteError as exc:
                raise np.linalg.LinAlgError(f"matrix is not positive definite: {exc}") from exc
        else:
            self._factor = spla.splu(A, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                                     options={"SymmetricMode": True})
            d = self._factor.U.diagonal()
            if np.any(d <= 0):
                raise np.linalg.LinAlgError("matrix is not positive definite (non-positive pivot)")

    def solve(self, b):
        """Solve ``A x = b`` (``b`` a vector or a matrix of right-hand sides)."""
        b = np.asarray(b, dtype=np.float64)
        if self.backend == "cholmod":
            return self._factor(b)
        return self._factor.solve(b)

    def logdet(self):
        """``log det A``."""
        if self.backend == "cholmod":
            return float(self._factor.logdet())
        return float(np.sum(np.log(self._factor.U.diagonal())))


def cholesky(A, backend="auto"):
    """Factor a sparse symmetric positive definite matrix.

    Parameters
    ----------
    A : sparse matrix
    backend : {"auto", "cholmod", "superlu"}
        ``"auto"`` uses CHOLMOD when scikit-sparse is installed, else SuperLU
        (warning once).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> f = cholesky(sp.identity(3) * 2.0, backend="superlu")
    >>> round(f.logdet(), 6)
    2.079442
    """
    return Factor(A, backend)
