"""Two symmetric ARPACK problems advanced in lockstep.

A spectrum needs the largest eigenvalues of ``L`` and of ``L^{-1}`` of the
same sample.  ``scipy.sparse.linalg.eigsh`` runs one problem to the end,
calling its operator once per step.  Run in two threads, the two problems
hand the GIL back and forth at every step, and on a virtual machine those
hand-overs (a sleeping thread to wake, twice per step) cost as much as the
steps themselves.  Here one thread drives both problems through ARPACK's
reverse communication: each step, both ask for one operator application, and
one call applies both (:meth:`sheaflinalg.spectral.operators.chain.CoboundaryOperator.apply_pair`
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

from .lanczos import LargestLanczos

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
    system : int
        Which pair of problems (:func:`largest_pairs`; 0 for :func:`largest_pair`).
    """

    def __init__(self, index, cause, system=0):
        super().__init__(f"ARPACK problem {index} of system {system} did not converge: {cause}")
        self.index = index
        self.cause = cause
        self.system = system


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

    def apply_batch(a, b):
        apply_pair(a[0][1:] if a else None, b[0][1:] if b else None)
    return largest_pairs(apply_batch, n, 1, k, tol, maxiter, ncv, v0)[0]


def largest_pairs(apply_batch, n, count, k, tol=0.0, maxiter=None, ncv=None, v0=None, lanczos=False):
    """The ``k`` largest eigenpairs of ``count`` pairs of symmetric operators ``A_u``, ``B_u``, all in lockstep.

    Every step, each of the ``2 count`` problems that has not converged asks for one product, and one
    call ``apply_batch(a, b)`` answers them all: ``a`` (and ``b``) is a list of ``(u, x, y)``, write
    ``A_u x`` (``B_u x``) into ``y``; either list may be empty.  Each problem runs exactly as alone
    (:func:`largest_pair` is the case ``count = 1``): batching the products lets an operator
    amortise its per-call work over the systems.
    ``ncv`` is one value for both problems or a pair ``(ncv_A, ncv_B)`` (:func:`problem_ncv`).
    ``lanczos=True`` (with ``k = 1``) finds the largest eigenpair of each ``A_u`` by the plain Lanczos
    recurrence instead (:class:`~sheaflinalg.spectral.lanczos.LargestLanczos`; ``ncv_A`` unused);
    ``lanczos="value"`` its eigenvalue alone, ``(wA, None, residual estimate)``, in half the products;
    a callable ``lanczos(n, tol, maxiter, v0)`` makes each ``A_u``'s problem (an object with the same
    ``request()`` / ``result()``, e.g. :class:`~sheaflinalg.spectral.windowed.WindowedLargest`).

    Returns
    -------
    list of ((wA, VA), (wB, VB))
        As ``eigsh`` returns them, one entry per system.

    Raises
    ------
    ArpackNotConverged
        Says which system and which of its problems did not converge.

    Examples
    --------
    >>> A = [np.diag(np.arange(1.0, 11.0)) * (u + 1) for u in range(3)]
    >>> def apply_batch(a, b):
    ...     for u, x, y in a + b:
    ...         y[:] = A[u] @ x
    >>> [round(float(wa[0]), 9) for (wa, _), _ in largest_pairs(apply_batch, 10, 3, 1, v0=np.ones(10))]
    [10.0, 20.0, 30.0]
    """
    if not REVERSE_COMMUNICATION:
        return [_largest_pair_in_sequence(_one_system(apply_batch, u), n, k, tol, maxiter, ncv, v0)
                for u in range(count)]
    def problem(i):
        if i == 0 and callable(lanczos) and k == 1:
            return lanczos(n, tol, maxiter, v0)
        if i == 0 and lanczos and k == 1:
            return LargestLanczos(n, tol, maxiter, v0, vector=lanczos != "value")
        return _Problem(n, k, tol, maxiter, problem_ncv(ncv, i), v0)
    problems = [(problem(0), problem(1)) for _ in range(count)]
    active = [[True, True] for _ in range(count)]
    while True:
        requests = ([], [])
        for u, pair in enumerate(problems):
            for i, problem in enumerate(pair):
                if active[u][i]:
                    try:
                        request = problem.request()
                    except spla.ArpackNoConvergence as exc:
                        raise ArpackNotConverged(i, exc, u) from None
                    active[u][i] = request is not None
                    if request is not None:
                        requests[i].append((u, *request))
        if not (requests[0] or requests[1]):
            break
        apply_batch(*requests)
    return [(pair[0].result(), pair[1].result()) for pair in problems]


def problem_ncv(ncv, i):
    """The ``ncv`` of problem ``i`` (0 or 1) from one value for both or a pair.

    Examples
    --------
    >>> problem_ncv(30, 1), problem_ncv((40, None), 0), problem_ncv((40, None), 1)
    (30, 40, None)
    """
    return ncv[i] if isinstance(ncv, tuple) else ncv


def _one_system(apply_batch, u):
    """``apply_pair`` of system ``u`` of an ``apply_batch``."""
    def apply_pair(a, b):
        apply_batch([(u, *a)] if a is not None else [], [(u, *b)] if b is not None else [])
    return apply_pair


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
            results.append(spla.eigsh(A, k=k, which="LA", tol=tol, maxiter=maxiter, ncv=problem_ncv(ncv, i),
                                      v0=v0))
        except spla.ArpackNoConvergence as exc:
            raise ArpackNotConverged(i, exc) from None
    return results[0], results[1]
