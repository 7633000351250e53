"""The largest eigenpair of a large symmetric operator by the plain Lanczos recurrence.

ARPACK keeps ``ncv`` Lanczos vectors and orthogonalises every new one against
all of them; when the top of the spectrum is tightly clustered (ResNet-20 on
one 3x32x32 input: the two largest eigenvalues of ``L`` 7.5e-5 apart
relatively) it needs a large ``ncv`` and many restarts, and for a vector of
675,978 coordinates that orthogonalisation costs twice as much as the
products with ``L`` themselves.  The three-term recurrence alone keeps three
vectors and needs no restart.  Its vectors lose orthogonality only once a
Ritz pair has converged (Paige), and the residual estimate of that pair stays
valid, so stopping at a residual of ``tol >= 1e-10`` (:data:`MIN_TOL`) comes
well before a second copy of the eigenvalue could form.  The eigenvector is
then rebuilt by running the recurrence a second time from the same start with
the stored coefficients (the same vectors bit for bit, three in memory), and
its residual is checked with one more product.

:class:`LargestLanczos` answers the reverse-communication protocol of
:func:`sheaflinalg.spectral.arpack_pair.largest_pairs` (``request()`` /
``result()``), so it advances in lockstep with ARPACK's problems.
"""

import numpy as np
import scipy.sparse.linalg as spla
from scipy.linalg import eigh_tridiagonal

#: The smallest relative tolerance the recurrence is used for (below it, ARPACK with full
#: reorthogonalisation): a converged pair's copy forms only as its residual nears rounding.
MIN_TOL = 1e-10
#: Products allowed per unit of ``maxiter`` (ARPACK's ``maxiter`` counts restarts of about this
#: many products each with its default ``ncv``), and when no ``maxiter`` is given.
STEPS_PER_ITERATION = 20
DEFAULT_MAX_STEPS = 20_000
#: How far the rebuilt vector's checked residual may exceed ``tol`` before the pair is refused.
RESIDUAL_SLACK = 100.0


class LargestLanczos:
    """The largest eigenpair of a symmetric operator ``A`` of size ``n``, one product at a time.

    Parameters
    ----------
    n : int
    tol : float
        Stop when the Ritz estimate ``|beta_m s_m|`` is at most ``tol * |theta|`` (ARPACK's test).
    maxiter : int or None
        At most ``STEPS_PER_ITERATION * maxiter`` products (default :data:`DEFAULT_MAX_STEPS`).
    v0 : ndarray
        Start vector (not modified).
    vector : bool
        Also rebuild the eigenvector (a second run of the recurrence: as many products again, and one to
        check its residual).  Without it, :meth:`result` gives the eigenvalue and the Ritz estimate of the
        residual that stopped the recurrence.

    Examples
    --------
    >>> A = np.diag(np.arange(1.0, 201.0))
    >>> problem = LargestLanczos(200, 1e-10, None, np.ones(200))
    >>> while (request := problem.request()) is not None:
    ...     x, y = request
    ...     y[:] = A @ x
    >>> w, V = problem.result()
    >>> round(float(w[0]), 9), round(float(abs(V[199, 0])), 6)
    (200.0, 1.0)
    """

    def __init__(self, n, tol, maxiter, v0, vector=True):
        self.n, self.tol, self.vector = n, tol, vector
        self.max_steps = DEFAULT_MAX_STEPS if maxiter is None else STEPS_PER_ITERATION * int(maxiter)
        self._start = np.asarray(v0, dtype=np.float64) / np.linalg.norm(v0)
        self._alpha, self._beta = [], []
        self._q, self._q_prev, self._w = self._start.copy(), np.zeros(n), np.empty(n)
        self._phase = "build"
        self._pending = False
        self._theta = self._s = self._v = None

    def request(self):
        """``(x, y)``: write ``A x`` into ``y``; None once the pair is found.

        Raises
        ------
        scipy.sparse.linalg.ArpackNoConvergence
            No convergence within the step cap, or the rebuilt vector's residual is far above ``tol``.
        """
        if self._pending:
            self._pending = False
            {"build": self._extend, "replay": self._replay, "check": self._check}[self._phase]()
        if self._phase == "done":
            return None
        self._pending = True
        return (self._v if self._phase == "check" else self._q), self._w

    def result(self):
        """``(w, V)``: the eigenvalue as an array of one and the unit eigenvector as a column; without the vector
        ``(w, None, residual)``, the relative Ritz estimate ``|beta_m s_m| / |theta|`` (at most ``tol``)."""
        if not self.vector:
            return np.array([self._theta]), None, self._estimate
        return np.array([self._theta]), self._v.reshape(-1, 1)

    @property
    def steps(self):
        """Products absorbed by the recurrence so far (its rebuilding run not counted)."""
        return len(self._alpha)

    @property
    def theta(self):
        """The largest Ritz value so far (a lower bound of the largest eigenvalue), None before the first step."""
        return self._theta

    @property
    def first_alpha(self):
        """``q_1^T A q_1``: the Rayleigh quotient of the start vector, None before the first step."""
        return self._alpha[0] if self._alpha else None

    @property
    def start_overlap(self):
        """``|s_1|``: the cosine between the start vector and the current Ritz vector, None before the first step."""
        return None if self._s is None else float(abs(self._s[0]))

    @property
    def building(self):
        """Whether the recurrence has not yet met its stopping rule."""
        return self._phase == "build"

    def _orthogonalise(self, alpha, beta_prev):
        self._w -= alpha * self._q + beta_prev * self._q_prev

    def _advance(self, beta):
        self._q_prev, self._q = self._q, self._w / beta

    def _extend(self):
        """Absorb ``A q``: one more column of the tridiagonal matrix, then test convergence."""
        alpha = float(self._q @ self._w)
        self._orthogonalise(alpha, self._beta[-1] if self._beta else 0.0)
        beta = float(np.linalg.norm(self._w))
        self._alpha.append(alpha)
        self._beta.append(beta)
        m = len(self._alpha)
        theta, s = eigh_tridiagonal(np.array(self._alpha), np.array(self._beta[:-1]), select="i",
                                    select_range=(m - 1, m - 1))
        self._theta, self._s = float(theta[0]), s[:, 0]
        if beta * abs(self._s[-1]) <= self.tol * abs(self._theta) or beta == 0.0:
            self._estimate = beta * abs(self._s[-1]) / max(abs(self._theta), 1e-300)
            if self.vector:
                self._start_replay()
            else:
                self._phase = "done"
        elif m >= self.max_steps:
            raise spla.ArpackNoConvergence(f"the Lanczos recurrence did not converge in {m} products", [], [])
        else:
            self._advance(beta)

    def _start_replay(self):
        """Rebuild the Ritz vector ``sum_j s_j q_j`` by running the recurrence again with the stored coefficients."""
        self._q, self._q_prev = self._start.copy(), np.zeros(self.n)
        self._v = self._s[0] * self._q
        self._j = 0
        self._phase = "replay" if len(self._alpha) > 1 else "check"
        if self._phase == "check":
            self._finish_vector()

    def _replay(self):
        j = self._j
        self._orthogonalise(self._alpha[j], self._beta[j - 1] if j > 0 else 0.0)
        self._advance(self._beta[j])
        self._v += self._s[j + 1] * self._q
        self._j = j + 1
        if self._j + 1 == len(self._alpha):
            self._finish_vector()

    def _finish_vector(self):
        self._v /= np.linalg.norm(self._v)
        self._phase = "check"

    def _check(self):
        """Refuse a vector whose true residual ``||A v - theta v||`` is far above the estimate's tolerance."""
        residual = float(np.linalg.norm(self._w - self._theta * self._v))
        if residual > RESIDUAL_SLACK * self.tol * abs(self._theta):
            raise spla.ArpackNoConvergence(
                f"the Lanczos vector's residual {residual / abs(self._theta):.2e} is far above tol {self.tol:g} "
                f"(orthogonality lost)", [], [])
        self._phase = "done"
