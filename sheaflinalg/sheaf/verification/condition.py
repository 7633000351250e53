"""A cheap lower estimate of ``cond_2(delta_Omega)`` for the matrix-free :func:`sheaflinalg.verify` report.

The sound upper bound of :func:`~sheaflinalg.sheaf.verification.matrix_free.condition_bound` is computed only
where a check fails (it costs far more than the checks at ImageNet size, and is often astronomically loose).
Where every check passes the report carries this estimate instead, labelled as one: a few Lanczos steps
on ``L = delta^T delta`` and on ``L^{-1} = delta^{-1} delta^{-T}`` (one product, or one substitution
pair, per step and sample).  The largest Ritz value of a Lanczos space never exceeds the operator's
largest eigenvalue (up to rounding), so ``sqrt(theta(L) theta(L^{-1}))`` is a lower bound on
``cond_2(delta_Omega) = sqrt(lambda_max(L) / lambda_min(L))``; with a few steps it is typically within a
small factor of it (the top of ``L^{-1}``'s spectrum is well separated).
"""

import numpy as np
from scipy.linalg import eigh_tridiagonal

#: Lanczos steps of each end (each step: one product with ``L`` and one substitution pair per sample).
CONDITION_STEPS = 6


def largest_ritz_values(apply, M, n, steps, seed=0):
    """The largest Ritz value of each row's Lanczos space of dimension ``steps`` (a lower bound on ``lambda_max``).

    ``apply(Q)`` applies the ``M`` symmetric positive semi-definite operators to the rows of ``Q`` (M, n).

    Examples
    --------
    >>> d = np.arange(1.0, 11.0)
    >>> theta = largest_ritz_values(lambda Q: Q * np.array([d, 2 * d]), 2, 10, 10)
    >>> np.round(theta, 9).tolist()
    [10.0, 20.0]
    """
    q = np.random.default_rng(seed).standard_normal((M, n))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    q_prev, beta_prev = np.zeros_like(q), np.zeros(M)
    alpha, beta = np.zeros((steps, M)), np.zeros((steps, M))
    for j in range(min(steps, n)):
        w = apply(q)
        alpha[j] = np.einsum("ij,ij->i", q, w)
        w -= alpha[j][:, None] * q + beta_prev[:, None] * q_prev
        beta[j] = np.linalg.norm(w, axis=1)
        beta_prev = beta[j]
        q_prev, q = q, np.divide(w, beta[j][:, None], out=np.zeros_like(w), where=beta[j][:, None] > 0)
    m = min(steps, n)
    return np.array([eigh_tridiagonal(alpha[:m, s], beta[:m - 1, s], eigvals_only=True, select="i",
                                      select_range=(m - 1, m - 1))[0] for s in range(M)])


def condition_lower_estimate(op, M, steps=CONDITION_STEPS):
    """Per sample, a lower estimate of ``cond_2(delta_Omega)`` from ``steps`` Lanczos steps at each end.

    Parameters
    ----------
    op : GraphCoboundary
        ``delta_Omega`` of a batch of samples (the verified state's).
    M : int
        The batch's number of samples.
    steps : int

    Returns
    -------
    ndarray, shape (n_samples,)
        ``max(1, sqrt(theta(L) theta(L^{-1})))``: at most ``cond_2(delta_Omega)`` up to rounding.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> from sheaflinalg.sheaf.matrix_free.coboundary import GraphCoboundary
    >>> fc = sl.Node("fc", "linear", ["x"], params={"weight": np.array([[3.0, 4.0]]), "bias": np.zeros(1)})
    >>> net = sl.Network.from_nodes((2,), [fc, sl.Node("r", "relu", ["fc"])])
    >>> op = GraphCoboundary(net.graph, net.evaluate(np.ones((1, 2))).pattern)
    >>> round(float(condition_lower_estimate(op, 1)[0]), 4)      # delta = [[1, 0], [-1, 1]]: cond 2.618
    2.618
    """
    n = op.layout.n_free
    top = largest_ritz_values(lambda Q: op.apply_transpose(op.apply(Q, threads=2), threads=2), M, n, steps)
    inverse = largest_ritz_values(lambda Q: op.solve(op.solve_transpose(Q)), M, n, steps, seed=1)
    with np.errstate(invalid="ignore"):
        return np.maximum(1.0, np.sqrt(np.maximum(top, 0.0) * np.maximum(inverse, 0.0)))
