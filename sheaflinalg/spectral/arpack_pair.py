"""Two symmetric ARPACK problems advanced in lockstep.

A spectrum needs the largest eigenvalues of ``L`` and of ``L^{-1}`` of the
same sample.  ``scipy.sparse.linalg.eigsh`` runs one problem to the end,
calling its operator once per step.  Run in two threads, the two problems
hand the GIL back and forth at every step, and on a virtual machine those
hand-overs (a sleeping thread to wake, twice per step) cost as much as the
steps themselves.  Here one thread drives both problems through ARPACK's
reverse communication: each step, both ask for one operator application, and
one call applies both (:meth:`sheaflinalg.spectral.operators.CoboundaryOperator.apply_pair`
streams the weights twice for the pair instead of three times, on two cores).

The ARPACK problems are SciPy's own (``_SymmetricArpackParams``, the object
``eigsh`` drives), so the iterations, tolerances, defaults and results are
exactly ``eigsh(A, k, which="LA", ...)``'s.  SciPy does not make that class
public; when it is missing or has changed shape, :func:`largest_pair` falls
back to two ``eigsh`` calls in sequence (same results, slower), and
:data:`REVERSE_COMMUNICATION` says which path is in use.
"""

import numpy as np
import scipy.sparse.linalg as spla

try:
    from scipy.sparse.linalg._eigen.arpack.arpack import _SymmetricArpackParams
except ImportError:  # pragma: no cover - depends on the SciPy version
    _SymmetricArpackParams = None

_NEEDED = ("iterate", "extract", "converged", "workd", "ipntr", "OP", "n")


def _reverse_communication_available():
    if _SymmetricArpackParams is None:
        return False
    try:
        p = _SymmetricArpackParams(4, 1, "d", lambda x: x, 1, None, None, None, 3, np.ones(4), 10, "LA", 0.0)
    except Exception:  # pragma: no cover - depends on the SciPy version
        return False
    return all(hasattr(p, name) for name in _NEEDED)


#: Whether the two problems run in lockstep (SciPy's ARPACK object is usable).
REVERSE_COMMUNICATION = _reverse_communication_available()


class ArpackNotConverged(RuntimeError):
    """One of the two problems did not converge within ``maxiter``.

    Attributes
    ----------
    index : int
        Which problem (0 or 1).
    cause : scipy.sparse.linalg.ArpackNoConvergence
    """

    def __init__(self, index, cause):
        super().__init__(f"ARPACK problem {index} did not converge: {cause}")
        self.index = index
        self.cause = cause


class _Problem:
    """The ``k`` largest eigenpairs of one symmetric operator, one request at a time."""

    def __init__(self, n, k, tol, maxiter, ncv, v0):
        self._params = _SymmetricArpackParams(n, k, "d", self._record, 1, None, None, None,
                                              ncv, v0, maxiter, "LA", tol)
        self._x = None
        self._shift = None

    def _record(self, x):
        # ARPACK asked for y = A x: keep the view of x, answer later (the 0.0
        # written into y now is overwritten before ARPACK reads it)
        self._x = x
        return 0.0

    def request(self):
        """Advance to ARPACK's next operator request.

        Returns
        -------
        (x, y) or None
            Views into ARPACK's work array: the caller writes ``A x`` into
            ``y``; ``None`` once the problem has converged.
        """
        p = self._params
        while not p.converged:
            self._x = None
            p.iterate()
            if self._x is not None:
                if self._shift is None:
                    # ipntr is 1-based in SciPy's Fortran ARPACK and 0-based in its C
                    # port: read the convention off the view of x once
                    x_at = (self._x.ctypes.data - p.workd.ctypes.data) // p.workd.itemsize
                    self._shift = int(p.ipntr[0]) - x_at
                y_at = int(p.ipntr[1]) - self._shift
                return self._x, p.workd[y_at:y_at + p.n]
        return None

    def result(self):
        """(eigenvalues, eigenvectors as columns) in ARPACK's order."""
        return self._params.extract(True)


def largest_pair(apply_pair, n, k, tol=0.0, maxiter=None, ncv=None, v0=None):
    """The ``k`` largest eigenpairs of two symmetric operators ``A`` and ``B``.

    Parameters
    ----------
    apply_pair : callable
        ``apply_pair(a, b)`` with ``a`` and ``b`` each either ``None`` or a
        pair ``(x, y)``: write ``A x`` into ``y`` (for ``a``) and ``B x`` into
        ``y`` (for ``b``).
    n, k, tol, maxiter, ncv, v0
        As in ``scipy.sparse.linalg.eigsh`` (``which="LA"``), for both problems.

    Returns
    -------
    (wA, VA), (wB, VB)
        As ``eigsh`` returns them.

    Raises
    ------
    ArpackNotConverged
        Says which problem did not converge.

    Examples
    --------
    >>> import numpy as np
    >>> A, B = np.diag(np.arange(1.0, 31.0)), np.diag(np.arange(30.0, 0.0, -1.0) ** 2)
    >>> def apply_pair(a, b):
    ...     for M, req in ((A, a), (B, b)):
    ...         if req is not None:
    ...             req[1][:] = M @ req[0]
    >>> (wa, _), (wb, _) = largest_pair(apply_pair, 30, 1, v0=np.ones(30))
    >>> round(float(wa[0]), 9), round(float(wb[0]), 9)
    (30.0, 900.0)
    """
    if not REVERSE_COMMUNICATION:
        return _largest_pair_in_sequence(apply_pair, n, k, tol, maxiter, ncv, v0)
    problems = [_Problem(n, k, tol, maxiter, ncv, v0), _Problem(n, k, tol, maxiter, ncv, v0)]
    requests = [None, None]
    active = [True, True]
    while True:
        for i, problem in enumerate(problems):
            if active[i]:
                try:
                    requests[i] = problem.request()
                except spla.ArpackNoConvergence as exc:
                    raise ArpackNotConverged(i, exc) from None
                active[i] = requests[i] is not None
        if not (active[0] or active[1]):
            break
        apply_pair(requests[0], requests[1])
    return problems[0].result(), problems[1].result()


def _largest_pair_in_sequence(apply_pair, n, k, tol, maxiter, ncv, v0):
    results = []
    for i in range(2):
        def matvec(x, i=i):
            y = np.empty(n)
            request = (np.ascontiguousarray(x, dtype=np.float64).reshape(-1), y)
            apply_pair(*((request, None) if i == 0 else (None, request)))
            return y

        A = spla.LinearOperator((n, n), matvec=matvec, dtype=np.float64)
        try:
            results.append(spla.eigsh(A, k=k, which="LA", tol=tol, maxiter=maxiter, ncv=ncv, v0=v0))
        except spla.ArpackNoConvergence as exc:
            raise ArpackNotConverged(i, exc) from None
    return results[0], results[1]
