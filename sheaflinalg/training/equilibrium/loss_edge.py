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
quadratically).  Then the coefficients of the residuals are
``G^-1 [w; c]``.  The per-sample work (the inverse Gram matrix, Newton's steps)
is compiled (:mod:`sheaflinalg.kernels.equilibrium`): a few small Cholesky
solves per sample, where batched numpy calls cost more in overhead than in
arithmetic.  A negative nudging ``b`` (symmetric nudging) keeps a minimum
only while ``P + b H`` stays positive definite (``H`` the loss's Hessian);
:class:`NudgingTooNegative` says when it does not, and how far ``b`` may go.

Potentials (per sample, ``p = phi(z)``): ``"mse"``: ``1/2 ||p - y||^2``;
``"cross_entropy"``: ``sum(softplus(z) - y z)`` (sigmoid) or
``sum(y) logsumexp(z) - y . z`` (softmax), the cross-entropies written in ``z``
(no clipping).  Newton's matrix is the exact Hessian; where the mean squared
error through a nonlinear output makes ``P + b H`` indefinite (away from the
minimum, ``b > 0``), the step uses a positive semidefinite ``H`` instead (the
Gauss-Newton matrix, or the diagonal Hessian's nonnegative part).
"""

import numpy as np

from ...kernels.equilibrium import gradients, newton_matrix, output_coefficients, potentials
from ...kernels.potentials import PHI_CODES
from ...network.errors import NetworkOverflowError
from .settings import BIAS_SHARE

#: The losses an exact equilibrium is found for.
EQUILIBRIUM_LOSSES = ("mse", "cross_entropy")
_LOSS_CODES = {"mse": 0, "cross_entropy": 1}

#: Largest nudging ``|b|`` whose frozen solve tries the fixed point first (measured break-even near ``1e-2``).
FIXED_POINT_NUDGING = 1e-3
#: Steps of the fixed point before the Gram path takes over.
FIXED_POINT_STEPS = 8

#: Relative size of the force below which a state is an equilibrium (rounding of the substitutions; the graph
#: oracle's rest check).  The fixed point's step ``|T(u) - u|`` is the force it leaves on the output node, so
#: it stops early (:func:`fixed_point_tolerance`) only once that step is below it too.
REST = 1e-9

_NEWTON_CAP = 100
#: A full Newton step (exact Hessian) this small against ``w`` ends the iteration: convergence is quadratic,
#: so it leaves an error of order ``1e-16`` and the step that would confirm it is skipped.
_STEP_TOL = 1e-8


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
    out = np.empty(Z.shape[0])
    potentials(PHI_CODES[output], _LOSS_CODES[loss], np.ascontiguousarray(Z), np.ascontiguousarray(Y), out)
    return out


def gradient(output, loss, Z, Y):
    """The potential's gradient in ``z``, per sample (rows).

    Examples
    --------
    >>> import numpy as np
    >>> gradient("identity", "mse", np.array([[1.0, 2.0]]), np.array([[0.0, 0.0]])).tolist()
    [[1.0, 2.0]]
    """
    out = np.empty(Z.shape)
    gradients(PHI_CODES[output], _LOSS_CODES[loss], np.ascontiguousarray(Z), np.ascontiguousarray(Y), out)
    return out


def solve_coefficients(G, C, F, Y, b, output, loss):
    """The coefficients ``[u; lambda] = G^-1 [w; c]`` of every sample, ``w`` minimising ``psi``.

    Parameters
    ----------
    G : ndarray, shape (S, r, r)
        The rows' Gram matrices: ``n`` outputs, then the held coordinates (``r >= n``).
    C : ndarray, shape (S, r - n)
        The values the held rows move by.
    F, Y : ndarray, shape (S, n)
        Output pre-activation at zero residuals, and the targets.
    b : float
        Nudging (nonzero; negative for the minus side of symmetric nudging).
    output, loss : str

    Returns
    -------
    V : ndarray, shape (S, r)
        The coefficients: the residuals are ``J^T V``.
    W : ndarray, shape (S, n)
        The output displacements ``J e``.
    newton : int
        Newton steps of the slowest sample (1 for the one linear solve of the quadratic loss).

    Raises
    ------
    NudgingTooNegative
        ``P + b H`` is not positive definite for some sample (only possible for ``b < 0``).
    NetworkOverflowError
        ``G`` is not positive definite in float64, or Newton's method did not converge on samples whose
        ``G`` has lost its identity to rounding (entries above ``1 / eps``): weights too large, which a
        training run reports as divergence.
    RuntimeError
        Newton's method did not converge in 100 steps on samples whose ``G`` kept its identity (the
        potentials are smooth and convex in the cross-entropy case; the stalls met on trained networks
        are fixed and recorded in the tests).

    Examples
    --------
    >>> import numpy as np
    >>> V, W, _ = solve_coefficients(np.full((1, 1, 1), 2.0), np.zeros((1, 0)), np.array([[1.0]]),
    ...                              np.array([[0.0]]), 1.0, "identity", "mse")
    >>> W.round(12).tolist(), V.round(12).tolist()      # (1/2 + b) w = -b (f - y), u = w / 2
    ([[-0.666666666667]], [[-0.333333333333]])
    """
    S, n = F.shape
    V, W = np.empty((S, G.shape[1])), np.empty((S, n))
    status = np.empty(S, dtype=np.int64)
    F, Y = np.ascontiguousarray(F), np.ascontiguousarray(Y)
    output_coefficients(np.array(G, dtype=np.float64, order="C"), np.ascontiguousarray(C), F, Y, float(b),
                        PHI_CODES[output], _LOSS_CODES[loss], _STEP_TOL, _NEWTON_CAP, V, W, status)
    if (status == -2).any():
        bad = np.flatnonzero(status == -2)
        raise NetworkOverflowError(
            f"the Gram matrix J J^T of the output rows (>= I in exact arithmetic) is not positive definite "
            f"in float64 for {bad.size} of {S} samples (largest entry {np.abs(G[bad]).max():.3g}): the weights "
            f"have grown too large for float64")
    if (status < 0).any():
        P = np.linalg.inv(G)[:, :n, :n]
        raise _too_negative(P, b, output, loss, F + W, Y, np.flatnonzero(status < 0))
    stalled = status >= _NEWTON_CAP
    if stalled.any() and np.all(np.abs(G[stalled]).max(axis=(1, 2)) * np.finfo(np.float64).eps > 1.0):
        raise NetworkOverflowError(
            f"the loss edge's Newton solve did not converge for {int(stalled.sum())} samples whose Gram matrix "
            f"J J^T (>= I) has lost its identity to rounding (largest entry {np.abs(G[stalled]).max():.3g}): the "
            f"weights have grown too large for float64")
    if stalled.any():
        raise RuntimeError(f"the loss edge's Newton solve did not converge for {int(stalled.sum())} "
                           f"samples in {_NEWTON_CAP} steps (nudging {b!r}, loss {loss!r})")
    return V, W, int(status.max(initial=0))


def _too_negative(P, b, output, loss, Z, Y, bad):
    """The error for Newton matrices that are not positive definite: how many samples, and how far ``b`` may go."""
    n = Z.shape[1]
    g, H, p = np.empty(n), np.empty((n, n)), np.empty(n)
    lam = 1e-300
    for s in bad:
        newton_matrix(PHI_CODES[output], _LOSS_CODES[loss], Z[s], Y[s], g, H, p, False)
        # Generalised eigenvalues of (H, P): P + b H is positive definite for b > -1 / (the largest).
        lam = max(lam, np.linalg.eigvals(np.linalg.solve(P[s], H)).real.max())
    return NudgingTooNegative(
        f"nudging {b!r} is too negative: the equilibrium energy has no minimum for {bad.size} of {Z.shape[0]} "
        f"samples (I + b H M is not positive definite); this batch needs nudging > {-1.0 / lam:.3g} (take a "
        f"smaller nudging, or one-sided nudging)")


def takes_fixed_point(b, n_held):
    """Whether a frozen solve at nudging ``b`` with ``n_held`` held coordinates tries :func:`fixed_point`
    first (small nudging, nothing held; the held rows' constraints need the Gram matrix)."""
    return not n_held and abs(b) <= FIXED_POINT_NUDGING


def fixed_point_tolerance(b, order):
    """The relative error of the output coefficients ``u`` the fixed point may leave at nudging ``b``:
    :data:`~.settings.BIAS_SHARE` (the one share of the nudging's own bias every equilibrium iteration may
    leave) of the bias of the nudging's ``order``, ``|b|`` relative one-sided and ``b^2`` symmetric.  The
    iteration stops at the iterate whose a-posteriori error (:func:`remaining_error`) is below it: the step
    that would only confirm convergence (at the default ``b = 1e-6`` it moves ``u`` by about ``b^2``
    relative) is skipped; the rounding floor of :func:`coefficient_excess` ends it when reached first.

    Examples
    --------
    >>> fixed_point_tolerance(1e-6, 1), fixed_point_tolerance(-1e-3, 2)
    (1e-08, 1e-08)
    """
    if order not in (1, 2):
        raise ValueError(f"the nudging's bias order is 1 (one-sided) or 2 (symmetric), got {order!r}")
    return BIAS_SHARE * abs(b) ** order


def remaining_error(step, before):
    """Per sample, the a-posteriori bound on ``|u - u*|`` of an iterate ``u`` whose step to its successor is
    ``step`` (max norm), ``before`` the step that led to it: with the contraction factor ``q = step / before``
    estimated from the two, ``|u - u*| <= step + q / (1 - q) step = step / (1 - q)`` (infinite where ``q >= 1``).

    Examples
    --------
    >>> remaining_error(np.array([1e-12, 2.0]), np.array([1e-6, 1.0])).tolist()
    [1.000001000001e-12, inf]
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        q = step / before
        return np.where(q < 1.0, step / (1.0 - q), np.inf)


def fixed_point(respond, F, Y, b, output, loss, order=1):
    """The output coefficients ``u = -b grad loss(F + J J^T u)`` by fixed-point iteration, without ``J J^T``.

    Parameters
    ----------
    respond : callable
        ``respond(u) -> (response, shift)``: whatever the caller needs of the residuals ``J^T u``
        (``response``, one backward substitution of ``u`` per sample) and the output's displacement
        ``J J^T u`` (``shift``, ``(S, n)``, one forward substitution).
    F, Y : ndarray, shape (S, n)
        Output pre-activation at zero residuals, and the targets.
    b : float
        Nudging (nonzero, ``|b|`` small: the iteration contracts by about ``|b| ||H J J^T||`` per step).
    output, loss : str
    order : {1, 2}
        The bias order of the nudging (1: one-sided, 2: symmetric), for :func:`fixed_point_tolerance`.

    Returns
    -------
    response or None
        ``respond(u)`` of the iterate ``u`` (already computed for that step) whose successor agrees with it to
        rounding, or whose remaining error (:func:`remaining_error`) is below :func:`fixed_point_tolerance`
        relative and whose step (the force left on the output node) below :data:`REST`; None as soon as some sample cannot converge within :data:`FIXED_POINT_STEPS` steps at the
        rate its last two steps show (:func:`out_of_reach`), or has not converged in them.
    """
    tol = fixed_point_tolerance(b, order)
    u = -b * gradient(output, loss, F, Y)
    moved = size = None
    with np.errstate(all="ignore"):         # a diverging iteration is detected, not warned about
        for step in range(1, FIXED_POINT_STEPS + 1):
            response, shift = respond(u)
            new = -b * gradient(output, loss, F + shift, Y)
            excess, last = coefficient_excess(new, u, F, b), np.abs(new - u).max(axis=1)
            done = excess <= 1.0
            if size is not None:
                done |= (remaining_error(last, size) <= tol * np.abs(new).max(axis=1)) & \
                    (last <= REST * (1.0 + np.abs(F).max(axis=1)))
            if np.all(done):
                return response
            if moved is not None and out_of_reach(excess, moved, FIXED_POINT_STEPS - step):
                return None
            u, moved, size = new, excess, last
    return None


def coefficient_excess(new, u, F, b):
    """Per sample, the step ``new - u`` of the output coefficients in units of their rounding: at most 1 when
    converged.  The rounding is relative to ``new`` or to the gradient's own (``b eps |z|``, ``F`` the output
    at zero residuals: a confident softmax sample has a tiny ``u`` whose relative rounding is large)."""
    floor = 4e-16 * abs(b) * (1.0 + np.abs(F).max(axis=1))
    return np.abs(new - u).max(axis=1) / (1e-14 * np.abs(new).max(axis=1) + floor)


def out_of_reach(excess, before, steps_left):
    """Whether some sample's step (``excess`` times its tolerance, ``before`` at the previous step) shrinks
    too slowly to reach its tolerance in ``steps_left`` more steps: the contraction factor of the two
    steps, extrapolated (1 or more: diverging).  The Gram path then takes the batch at once, instead of
    after every step of a hopeless iteration (nudging 1e-3 on a trained network: 8 wasted steps)."""
    open_ = (excess > 1.0) & (before > 1.0)     # a sample back above its tolerance by rounding goes on
    rate = excess[open_] / before[open_]
    if not np.all(rate < 1.0):
        return True
    return bool(np.any(np.log(excess[open_]) > steps_left * -np.log(rate)))
