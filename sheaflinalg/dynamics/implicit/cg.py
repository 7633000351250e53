"""Preconditioned conjugate gradients for a batch of independent symmetric positive definite systems.

Row ``s`` of every array is sample ``s``'s vector; the operator and the preconditioner act on all rows at
once (one product for the batch), while every sample has its own step lengths and stops on its own residual.
A sample whose system is solved keeps its solution (its step lengths are 0 from then on).
"""

import numpy as np


def _dot(a, b):
    return np.einsum("ij,ij->i", a, b)


def pcg(apply, precondition, b, tol, max_iter):
    """Solve ``A x = b`` row by row, ``A`` symmetric positive definite, from ``x = 0``.

    Parameters
    ----------
    apply : callable
        ``V -> A V`` on ``(M, n)`` rows.
    precondition : callable
        ``R -> P^{-1} R``, ``P`` symmetric positive definite.
    b : ndarray, shape (M, n)
    tol : float
        A sample stops when ``||b - A x||_2 <= tol ||b||_2``.
    max_iter : int
        Iterations at most.

    Returns
    -------
    x : ndarray, shape (M, n)
        Every iterate from ``x = 0`` lowers ``1/2 x^T A x - b^T x`` below 0, so ``b^T x > 0`` wherever
        ``b != 0``, whenever it stops.
    iterations : int
        Iterations made (for the slowest sample).

    Examples
    --------
    >>> A = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> x, k = pcg(lambda V: V @ A, lambda R: R / np.diag(A), np.array([[1.0, 2.0], [0.0, 0.0]]), 1e-12, 10)
    >>> np.allclose(x[0], np.linalg.solve(A, [1.0, 2.0])), x[1].tolist(), k
    (True, [0.0, 0.0], 2)
    """
    x, r = np.zeros_like(b), b.copy()
    goal = tol * np.sqrt(_dot(b, b))
    active = np.sqrt(_dot(r, r)) > goal
    z = precondition(r)
    p, rz = z.copy(), _dot(r, z)
    k = 0
    while k < max_iter and active.any():
        Ap = apply(p)
        step = np.where(active, rz / np.where(active, _dot(p, Ap), 1.0), 0.0)[:, None]
        x += step * p
        r -= step * Ap
        k += 1
        active &= np.sqrt(_dot(r, r)) > goal
        if not active.any():
            break
        z = precondition(r)
        rz_new = _dot(r, z)
        p = z + np.where(active, rz_new / np.where(active, rz, 1.0), 0.0)[:, None] * p
        rz = rz_new
    return x, k
