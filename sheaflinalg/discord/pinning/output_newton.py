"""The held coordinates of a frozen pinned solve with a nonlinear output: a minimisation in ``k`` dimensions.

For a frozen pattern the discord of the reduced sheaf with ``k`` coordinates held at ``t = E^T w`` is
``1/2 (t - t0)^T A^{-1} (t - t0)`` above its unpinned minimum, where ``t0 = E^T w0`` (``w0`` the forward
pass under the pattern) and ``A = E^T L^{-1} E`` (``L^{-1} = delta^{-1} delta^{-T}``: one backward and one
forward substitution per column, :class:`~sheaflinalg.discord.pinning.graph._MatrixFree`).  With the
output ``yhat = phi(z)`` pinned to ``y`` (sigmoid, tanh, softmax) the output node ``z`` (the first ``n``
held coordinates) is free and the output edge adds ``1/2 ||phi(z) - y||^2``; the other held coordinates
(switching surfaces) stay at 0.  :func:`held_outputs` minimises the sum over ``z`` alone: Gauss-Newton
steps ``(A^{-1}_zz + J^T J + sum_i r_i nabla^2 phi_i) dz = -grad`` (Newton; Gauss-Newton, without
the last term, where Newton's matrix is not positive definite) with backtracking, every step ``O(k^3)`` and no substitution, so
the nonlinear output is solved to rounding for each pattern instead of re-linearising the whole sheaf.
"""

import numpy as np

from ...network import activations

#: Gauss-Newton steps of the ``k``-dimensional problem before it gives up (each costs ``O(k^3)``).
STEPS = 500
#: Relative step size below which the ``k``-dimensional iteration has converged.
STEP_TOL = 1e-14
#: Relative size of a Newton step (with a positive definite matrix) taken whole, without the line search.
NEAR = 1e-6


def held_outputs(phi, A, t0, y):
    """``(t, converged)``: the held coordinates minimising the pinned discord with ``phi(t[:, :n])`` pinned
    to ``y`` and ``t[:, n:] = 0`` (see the module docstring), per sample.

    Parameters
    ----------
    phi : str
        The output activation (``"sigmoid"``, ``"tanh"`` or ``"softmax"``).
    A : ndarray, shape (M, k, k)
        ``E^T L^{-1} E`` per sample (symmetric positive definite).
    t0 : ndarray, shape (M, k)
        The held coordinates' values at the unpinned minimum (the forward pass under the pattern).
    y : ndarray, shape (M, n)
        The pinned output, ``n <= k``.

    Returns
    -------
    t : ndarray, shape (M, k)
    converged : ndarray of bool, shape (M,)
        The last step was below :data:`STEP_TOL` relative to ``1 + max |z|``.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.eye(2)[None]                                # one sample, the output alone held
    >>> t, ok = held_outputs("softmax", A, np.zeros((1, 2)), np.array([[1.0, 0.0]]))
    >>> bool(ok[0]), bool(t[0, 0] > 0 > t[0, 1]), bool(np.isclose(t[0].sum(), 0.0))
    (True, True, True)
    """
    M, k = t0.shape
    n = y.shape[1]
    S = np.linalg.inv(A)
    S = 0.5 * (S + S.transpose(0, 2, 1))
    z = t0[:, :n].copy()
    converged = np.zeros(M, dtype=bool)
    todo = np.arange(M)

    def objective(rows, zz):
        d = np.concatenate([zz - t0[rows, :n], -t0[rows, n:]], axis=1)
        Sd = np.einsum("mij,mj->mi", S[rows], d)
        r = activations.apply(phi, zz) - y[rows]
        return 0.5 * np.einsum("mi,mi->m", d, Sd) + 0.5 * np.einsum("mi,mi->m", r, r), Sd[:, :n], r

    for _ in range(STEPS):
        if todo.size == 0:
            break
        f, Sd, r = objective(todo, z[todo])
        J = activations.jacobian(phi, z[todo])
        grad = Sd + np.einsum("mji,mj->mi", J, r)
        H = S[todo][:, :n, :n] + np.einsum("mji,mjk->mik", J, J)
        newton = H + activations.curvature(phi, z[todo], r)
        convex = np.linalg.eigvalsh(newton)[:, 0] > 0.0       # Newton where it is a descent, Gauss-Newton else
        H[convex] = newton[convex]
        step = -np.linalg.solve(H, grad[..., None])[..., 0]
        size = np.abs(step).max(axis=1) / (1.0 + np.abs(z[todo]).max(axis=1))
        near = convex & (size <= NEAR)      # Newton's local convergence: the decrease is below rounding there
        ahead = z[todo] + step
        ahead[~near], stuck = _backtrack(lambda rows, zz: objective(todo[~near][rows], zz)[0], f[~near],
                                         grad[~near], z[todo][~near], step[~near])
        z[todo] = ahead
        small = size <= STEP_TOL
        stuck = np.isin(np.arange(todo.size), np.flatnonzero(~near)[stuck])
        converged[todo[small | stuck]] = True
        todo = todo[~(small | stuck)]
    return np.concatenate([z, np.zeros((M, k - n))], axis=1), converged


def _backtrack(objective, f, grad, z, step, halvings=50):
    """``(z_new, stuck)``: ``z + t step`` with ``t = 1, 1/2, ...`` until the objective decreases (Armijo);
    ``stuck`` where no decrease was found (the minimum up to rounding: ``z`` is kept)."""
    t = np.ones(z.shape[0])
    slope = np.einsum("mi,mi->m", grad, step)
    rows = np.arange(z.shape[0])
    out = z + step
    for _ in range(halvings):
        worse = objective(rows, out[rows]) > f[rows] + 1e-4 * t[rows] * slope[rows]
        rows = rows[worse]
        if rows.size == 0:
            break
        t[rows] /= 2
        out[rows] = z[rows] + t[rows, None] * step[rows]
    out[rows] = z[rows]
    stuck = np.zeros(z.shape[0], dtype=bool)
    stuck[rows] = True
    return out, stuck

