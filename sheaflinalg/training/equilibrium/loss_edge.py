"""The nudged loss edge in output coordinates: its potential, and the exact solve for the output's displacement.

With the weights and the activation pattern frozen, the state is an affine
function of the interior edge residuals ``e`` and the output pre-activation is
``z = f + J e`` (``f`` the forward value, ``J`` one row per output).  Only the
displacement ``w = J e`` matters to the loss: the smallest residuals that move
the output by ``w`` cost ``1/2 w^T M^-1 w`` with ``M = J J^T`` (and with
coordinates held at fixed values, the rows of those coordinates join ``J``:
the quadratic becomes ``1/2 w^T P w + h^T w``, ``P`` and ``h`` read off the
inverse Gram matrix).  So the equilibrium minimises, per sample, ::

    psi(w) = 1/2 w^T P w + h^T w + b * loss(f + w, y)

over ``w`` in ``R^{n_out}``: for the mean squared error of an identity output
one linear solve ``(P + b I) w = -h - b (f - y)``; otherwise Newton's method
with a backtracking line search on ``psi`` (the potentials are smooth; the
cross-entropies convex, so the step is the exact Newton step and converges
quadratically).  A negative nudging ``b`` (symmetric nudging) keeps a minimum
only while ``P + b H`` stays positive definite (``H`` the loss's Hessian);
:class:`NudgingTooNegative` says when it does not, and how far ``b`` may go.

Potentials (per sample, ``p = phi(z)``): ``"mse"``: ``1/2 ||p - y||^2``;
``"cross_entropy"``: ``sum(softplus(z) - y z)`` (sigmoid) or
``sum(y) logsumexp(z) - y . z`` (softmax), the cross-entropies written in ``z``
(no clipping).  For the mean squared error through a sigmoid or tanh the
Newton matrix keeps the diagonal Hessian's nonnegative part; through a
softmax it is the Gauss-Newton matrix ``J_phi^T J_phi``.
"""

import numpy as np

from ...network import activations

#: The losses an exact equilibrium is found for.
EQUILIBRIUM_LOSSES = ("mse", "cross_entropy")

_NEWTON_CAP = 100
_ARMIJO = 1e-4
#: A Newton step this small against ``w`` ends the iteration (the next one would change nothing).
_STEP_TOL = 1e-13


class NudgingTooNegative(ValueError):
    """A negative nudging for which the equilibrium energy has no minimum (``P + b H`` not positive definite)."""


def check_equilibrium_loss(loss):
    """Refuse a loss without an exact equilibrium (ValueError naming the two that have one)."""
    if loss not in EQUILIBRIUM_LOSSES:
        raise ValueError(f"exact equilibria are found for the losses {' and '.join(EQUILIBRIUM_LOSSES)}, got "
                         f"{loss!r} (its potential is not smooth: train it with method='euler')")
    return loss


def potential(output, loss, Z, Y):
    """``loss(z, y)`` per sample (rows), the output edge's potential in the output pre-activation.

    Examples
    --------
    >>> import numpy as np
    >>> potential("identity", "mse", np.array([[1.0, 2.0]]), np.array([[0.0, 0.0]])).tolist()
    [2.5]
    >>> bool(np.isclose(potential("softmax", "cross_entropy", np.zeros((1, 2)), np.array([[1.0, 0.0]]))[0],
    ...                 np.log(2)))
    True
    """
    if loss == "cross_entropy":
        if output == "sigmoid":
            return np.sum(np.logaddexp(0.0, Z) - Y * Z, axis=1)
        top = Z.max(axis=1, keepdims=True)
        lse = np.log(np.exp(Z - top).sum(axis=1)) + top[:, 0]
        return Y.sum(axis=1) * lse - np.einsum("ij,ij->i", Y, Z)
    D = activations.apply(output, Z) - Y
    return 0.5 * np.einsum("ij,ij->i", D, D)


def gradient_and_hessian(output, loss, Z, Y):
    """``(g, H)``: the potential's gradient in ``z`` (``(S, n)``) and the Newton matrix (``(S, n, n)``).

    ``H`` is the exact Hessian except for the mean squared error through a
    nonlinear output (see the module's notes); ``g`` is always exact.
    """
    S, n = Z.shape
    P = activations.apply(output, Z)
    if output == "softmax":
        weight = Y.sum(axis=1)[:, None] if loss == "cross_entropy" else 1.0
        Jphi = P[:, :, None] * (np.eye(n) - P[:, None, :])          # diag(p) - p p^T, symmetric
        if loss == "cross_entropy":
            return weight * P - Y, weight[:, :, None] * Jphi
        return np.einsum("sij,sj->si", Jphi, P - Y), Jphi @ Jphi
    if output == "identity":
        return Z - Y, np.broadcast_to(np.eye(n), (S, n, n))
    slope = P * (1.0 - P) if output == "sigmoid" else 1.0 - P * P
    if loss == "cross_entropy":
        return P - Y, _diagonal(slope)
    curvature = slope * (1.0 - 2.0 * P) if output == "sigmoid" else -2.0 * P * slope
    D = P - Y
    return slope * D, _diagonal(np.maximum(slope * slope + D * curvature, 0.0))


def _diagonal(values):
    S, n = values.shape
    out = np.zeros((S, n, n))
    out[:, np.arange(n), np.arange(n)] = values
    return out


def solve_displacement(P, h, F, Y, b, output, loss):
    """The output displacement ``w`` minimising ``psi`` for every sample, and the Newton iterations used.

    Parameters
    ----------
    P : ndarray, shape (S, n, n)
        Symmetric positive definite quadratic term (``M^-1`` without held coordinates).
    h : ndarray, shape (S, n) or None
        Linear term (None: zero).
    F, Y : ndarray, shape (S, n)
        Output pre-activation at zero residuals, and the targets.
    b : float
        Nudging (nonzero; negative for the minus side of symmetric nudging).
    output, loss : str

    Returns
    -------
    w : ndarray, shape (S, n)
    newton : int
        Newton steps of the slowest sample (0 for the one linear solve of the quadratic loss).

    Raises
    ------
    NudgingTooNegative
        ``P + b H`` is not positive definite for some sample (only possible for ``b < 0``).

    Examples
    --------
    >>> import numpy as np
    >>> w, _ = solve_displacement(np.eye(1)[None], None, np.array([[1.0]]), np.array([[0.0]]), 1.0,
    ...                           "identity", "mse")
    >>> w.round(12).tolist()      # (1 + b) w = -b (f - y)
    [[-0.5]]
    """
    S, n = F.shape
    h = np.zeros((S, n)) if h is None else h
    w = np.zeros((S, n))
    if output == "identity" and loss == "mse":
        K = P + b * np.eye(n)
        return _newton_step(K, h + b * (F - Y), P, b, output, loss, F, Y, w), 0
    todo = np.arange(S)
    for it in range(1, _NEWTON_CAP + 1):
        Pt, ht, Ft, Yt, wt = P[todo], h[todo], F[todo], Y[todo], w[todo]
        g, H = gradient_and_hessian(output, loss, Ft + wt, Yt)
        r = np.einsum("sij,sj->si", Pt, wt) + ht + b * g
        step = _newton_step(Pt + b * H, r, Pt, b, output, loss, Ft, Yt, wt)
        step = _backtrack(step, r, Pt, ht, Ft, Yt, wt, b, output, loss)
        w[todo] = wt + step
        big = np.abs(step).max(axis=1) > _STEP_TOL * np.abs(w[todo]).max(axis=1)
        todo = todo[big]
        if todo.size == 0:
            return w, it
    return w, _NEWTON_CAP


def _newton_step(K, r, P, b, output, loss, F, Y, w):
    """``-K^-1 r`` per sample by Cholesky; :class:`NudgingTooNegative` if some ``K`` is not positive definite."""
    try:
        L = np.linalg.cholesky(K)
    except np.linalg.LinAlgError:
        raise _too_negative(K, P, b, output, loss, F + w, Y) from None
    y = np.linalg.solve(L, -r[:, :, None])
    return np.linalg.solve(np.swapaxes(L, 1, 2), y)[:, :, 0]


def _backtrack(step, r, P, h, F, Y, w, b, output, loss):
    """Halve each sample's Newton step until ``psi`` decreases enough (Armijo); returns the accepted steps."""
    def psi(v):
        return 0.5 * np.einsum("si,sij,sj->s", v, P, v) + np.einsum("si,si->s", h, v) + \
            b * potential(output, loss, F + v, Y)
    base = psi(w)
    slope = np.einsum("si,si->s", r, step)
    t = np.ones(step.shape[0])
    for _ in range(40):
        bad = ~(psi(w + t[:, None] * step) <= base + _ARMIJO * t * slope)
        # Within rounding of the minimum psi cannot decrease measurably: accept the full step there.
        bad &= np.abs(slope) > 1e-15 * (np.abs(base) + 1e-300)
        if not bad.any():
            break
        t[bad] *= 0.5
    return t[:, None] * step


def _too_negative(K, P, b, output, loss, Z, Y):
    """The error for a Newton matrix that is not positive definite: how many samples, and the largest safe ``|b|``."""
    eig = np.linalg.eigvalsh(K)[:, 0]
    bad = np.flatnonzero(eig <= 0) if (eig <= 0).any() else np.array([int(np.argmin(eig))])
    _, H = gradient_and_hessian(output, loss, Z, Y)
    # Generalised eigenvalues of (H, P): P + b H is positive definite for b > -1 / max lambda.
    lam = max(max(np.linalg.eigvals(np.linalg.solve(P[s], H[s])).real.max() for s in bad), 1e-300)
    return NudgingTooNegative(
        f"nudging {b!r} is too negative: the equilibrium energy has no minimum for {bad.size} of {K.shape[0]} "
        f"samples (I + b H M is not positive definite, smallest eigenvalue {eig[bad].min():.3g}); this batch "
        f"needs nudging > {-1.0 / lam:.3g} (take a smaller nudging, or one-sided nudging)")
