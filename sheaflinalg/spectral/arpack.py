"""Extreme eigenpairs of one Laplacian by ARPACK: both ends in lockstep, residuals, clear failures.

The largest eigenpairs of ``L`` and of ``L^{-1}`` are two ARPACK problems
advanced together by :func:`sheaflinalg.spectral.arpack_pair.largest_pair`;
when one does not converge, :class:`SpectrumConvergenceError` reports the
residual reached.
"""

import numpy as np

from .._common.progress import progress_iter
from .arpack_pair import ArpackNotConverged, largest_pair, largest_pairs, problem_ncv
from .result import fix_signs


class SpectrumConvergenceError(RuntimeError):
    """ARPACK did not reach the requested tolerance.

    Attributes
    ----------
    sample : int
        Index of the sample whose eigenproblem failed.
    which : {"smallest", "largest"}
    residual : float
        Relative residual reached (of ``L`` for the largest eigenvalues, of
        ``L^{-1}`` for the smallest), estimated from a Lanczos space of the
        size ARPACK was allowed (SciPy does not expose ARPACK's own estimates).
    tol : float
    """

    def __init__(self, message, sample, which, residual, tol):
        super().__init__(message)
        self.sample, self.which, self.residual, self.tol = sample, which, residual, tol


def _start_vector(n):
    return np.random.default_rng(12345).standard_normal(n)


def _krylov_residual(matvec, n, k, ncv, maxiter):
    """Relative residual of the ``k`` largest Ritz pairs of a Lanczos space comparable to ARPACK's.

    SciPy does not expose ARPACK's own Ritz estimates when nothing converged,
    so the report uses the same start vector and an unrestarted Lanczos space
    of dimension ``ncv * maxiter`` (at most 100; full reorthogonalisation):
    residual ``|beta_m s_(m,i)| / |theta_i|`` of the wanted Ritz pairs.
    """
    ncv = ncv or min(n, max(2 * k + 1, 20))
    m = int(min(n, ncv * (maxiter or n * 10), 100))
    Q = np.zeros((n, m))
    alpha, beta = np.zeros(m), np.zeros(m)
    q = _start_vector(n)
    Q[:, 0] = q / np.linalg.norm(q)
    for j in range(m):
        w = matvec(Q[:, j])
        alpha[j] = Q[:, j] @ w
        w -= Q[:, :j + 1] @ (Q[:, :j + 1].T @ w)
        w -= Q[:, :j + 1] @ (Q[:, :j + 1].T @ w)
        beta[j] = np.linalg.norm(w)
        if j + 1 < m:
            if beta[j] == 0:
                m = j + 1
                break
            Q[:, j + 1] = w / beta[j]
    T = np.diag(alpha[:m]) + np.diag(beta[:m - 1], 1) + np.diag(beta[:m - 1], -1)
    theta, S = np.linalg.eigh(T)
    top = slice(max(m - k, 0), m)
    return float(np.max(np.abs(beta[m - 1] * S[-1, top]) / np.maximum(np.abs(theta[top]), 1e-300)))


def arpack_extremes(apply_pair, apply_L, apply_Linv, n, k, tol, maxiter, ncv, sample):
    """(smallest ascending, V_s, largest descending, V_l, residuals) from ARPACK.

    The largest eigenpairs of ``L`` and of ``L^{-1}`` are two ARPACK problems
    advanced in lockstep (:func:`sheaflinalg.spectral.arpack_pair.largest_pair`);
    ``apply_pair(a, b)`` writes ``L x`` for request ``a`` and ``L^{-1} x``
    for request ``b``.  ``apply_L``/``apply_Linv`` (one vector in, one out)
    check the residuals and estimate them for the error report.
    """
    k_arpack = min(k, n - 1)
    try:
        (wl, Vl), (mu, Vs) = largest_pair(apply_pair, n, k_arpack, tol=tol, maxiter=maxiter, ncv=ncv,
                                          v0=_start_vector(n))
    except ArpackNotConverged as exc:
        raise _not_converged(exc, apply_L, apply_Linv, n, k_arpack, tol, maxiter, ncv, sample) from None
    return _extremes((wl, Vl), mu, Vs, apply_L)


def arpack_group(apply_batch, single, n, k, tol, maxiter, ncv, samples, lanczos=False):
    """:func:`arpack_extremes` of several systems at once, every product of a step in one batch.

    ``apply_batch`` as in :func:`sheaflinalg.spectral.arpack_pair.largest_pairs` (system ``u`` is
    ``samples[u]``); ``single(u)`` gives ``(apply_L, apply_Linv)`` of system ``u`` (one vector in,
    one out) for the residuals.  Returns one :func:`arpack_extremes` tuple per system.
    ``lanczos`` as in :func:`~sheaflinalg.spectral.arpack_pair.largest_pairs`.
    """
    k_arpack = min(k, n - 1)
    try:
        results = largest_pairs(apply_batch, n, len(samples), k_arpack, tol=tol, maxiter=maxiter, ncv=ncv,
                                v0=_start_vector(n), lanczos=lanczos)
    except ArpackNotConverged as exc:
        raise _not_converged(exc, *single(exc.system), n, k_arpack, tol, maxiter, ncv,
                             samples[exc.system]) from None
    return [_extremes(largest, mu, Vs, single(u)[0]) for u, (largest, (mu, Vs)) in enumerate(results)]


def _not_converged(exc, apply_L, apply_Linv, n, k_arpack, tol, maxiter, ncv, sample):
    """The :class:`SpectrumConvergenceError` of an :class:`ArpackNotConverged`, with the residual reached."""
    which, matvec = ("largest", apply_L) if exc.index == 0 else ("smallest", apply_Linv)
    ncv = problem_ncv(ncv, exc.index)
    res = _krylov_residual(matvec, n, k_arpack, ncv, maxiter)
    best = (f"{len(exc.cause.eigenvalues)} of {k_arpack} eigenpairs converged, achieved relative "
            f"residual about {res:.3e} (tol {tol:g})")
    return SpectrumConvergenceError(
        f"ARPACK did not converge for sample {sample} ({which} eigenvalues) within "
        f"maxiter={maxiter}: {best}; raise maxiter or ncv, or loosen tol",
        sample, which, res, tol)


def _extremes(largest, mu, Vs, apply_L):
    """ARPACK's eigenpairs of ``L`` (``largest``: ``(wl, Vl)``, or ``(wl, None, residual estimate)`` without its
    vector) and ``L^{-1}`` as (smallest ascending, V_s, largest descending, V_l, residuals)."""
    wl, Vl = largest[:2]
    order = np.argsort(wl)[::-1]
    wl, Vl = wl[order], (None if Vl is None else Vl[:, order])
    order = np.argsort(mu)[::-1]
    ws, Vs = 1.0 / mu[order], Vs[:, order]  # mu descending -> lambda ascending
    return ws, Vs, wl, Vl, (_residual(apply_L, ws, Vs), largest[2] if Vl is None else _residual(apply_L, wl, Vl))


def arpack_samples(run, groups, n, k, vectors, progress):
    """The extreme eigenpairs of every distinct system, a group of systems at a time.

    ``groups`` is a list of lists of system numbers; ``run(group)`` returns one
    :func:`arpack_extremes` tuple per system of the group and the number of operator
    applications it used.  Returns ``(smallest, largest, vectors_smallest, vectors_largest,
    residuals, operator applications)``, one row per system.
    """
    U = sum(len(group) for group in groups)
    ws, wl = np.empty((U, k)), np.empty((U, k))
    Vs = np.empty((U, k, n)) if vectors else None
    Vl = np.empty((U, k, n)) if vectors else None
    residuals = np.empty((U, 2))
    n_op = 0
    for group in progress_iter(groups, len(groups), progress, "spectrum"):
        results, used = run(group)
        n_op += used
        for u, (a, Va, b, Vb, res) in zip(group, results):
            ws[u], wl[u] = a, b
            residuals[u] = res
            if vectors:
                Vs[u] = fix_signs(Va.T)
                Vl[u] = fix_signs(Vb.T)
    return ws, wl, Vs, Vl, residuals, n_op


def per_system(make_operator, samples, n, k, tol, maxiter, ncv):
    """``run`` of :func:`arpack_samples` for groups of one system: the operator ``make_operator(u)``
    (``apply_pair``, ``laplacian_matvec``, ``laplacian_solve``, counters ``n_matvec``, ``n_solve``);
    ``samples[u]`` is the sample the errors name."""
    def run(group):
        (u,) = group
        op = make_operator(u)
        return ([arpack_extremes(op.apply_pair, op.laplacian_matvec, op.laplacian_solve, n, k, tol, maxiter, ncv,
                                 int(samples[u]))], op.n_matvec + op.n_solve)
    return run


def batched(make_operator, samples, n, k, tol, maxiter, ncv, lanczos=False, step=None):
    """``run`` of :func:`arpack_samples` for groups of systems sharing one operator ``make_operator(group)``
    (``apply_batch``, ``single``, counters ``n_matvec``, ``n_solve``; system ``i`` of the operator is
    ``group[i]``); ``lanczos`` as in :func:`~sheaflinalg.spectral.arpack_pair.largest_pairs`; ``step()`` (a
    progress bar's update), when given, is called after every step's products."""
    def run(group):
        op = make_operator(group)
        apply_batch = op.apply_batch
        if step is not None:
            def apply_batch(a, b):
                op.apply_batch(a, b)
                step()
        results = arpack_group(apply_batch, op.single, n, k, tol, maxiter, ncv, [int(samples[u]) for u in group],
                               lanczos)
        return results, op.n_matvec + op.n_solve
    return run


def _residual(apply_L, lam, V):
    """Largest relative residual ``||L v_j - lambda_j v_j|| / |lambda_j|``."""
    R = np.column_stack([apply_L(V[:, j]) - lam[j] * V[:, j] for j in range(V.shape[1])])
    return float(np.max(np.linalg.norm(R, axis=0) / np.maximum(np.abs(lam), 1e-300)))


def pair_of(apply_L, apply_Linv):
    """``apply_pair`` for :func:`arpack_extremes` from two one-vector operators."""
    def apply_pair(a, b):
        if a is not None:
            a[1][:] = apply_L(a[0])
        if b is not None:
            b[1][:] = apply_Linv(b[0])
    return apply_pair
