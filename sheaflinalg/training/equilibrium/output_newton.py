"""The nudged output of an exact equilibrium: the loss potential and the rank-``n_out`` Newton solve.

For a frozen activation pattern the output pre-activation is affine in the
edge residuals, ``z = f + J e``.  Minimising ``1/2 ||e||^2 + b L(z)`` gives
``e = J^T u`` with ``u`` in ``R^{n_out}`` solving ::

    F(u) = u + b grad L(f + S u) = 0,      S = J J^T (n_out x n_out per sample),

solved here by Newton's method, ``(I + b H S) d = -F`` (``H`` the loss's
curvature at ``z``), with backtracking on ``||F||`` (a Newton direction
lowers it whatever the sign of ``b``).  The loss potentials ``L`` are the ones
whose gradient is the training pull (:func:`~sheaflinalg.training.graph_loss.loss_pull`):

==================  =====================================  =======================
loss, output        ``L(z)``                               curvature ``H``
==================  =====================================  =======================
mse, identity       ``1/2 ||z - y||^2``                    ``I`` (one Newton step)
mse, other phi      ``1/2 ||phi(z) - y||^2``               ``J_phi^T J_phi`` (Gauss-Newton)
cross-entropy       ``logsumexp(z) - y.z`` (softmax),      ``diag(p) - p p^T``,
                    ``sum softplus(z) - y.z`` (sigmoid)    ``diag(p (1 - p))``
==================  =====================================  =======================

(the cross-entropy potentials equal the reported cross-entropy for one-hot or
binary targets; their curvature is exact, so Newton converges quadratically; for
``b > 0`` the problem is convex and ``I + b H S`` has eigenvalues ``>= 1``).
"""

from dataclasses import dataclass

import numpy as np

from ...network import activations
from ..graph_loss import loss_pull

#: Newton stops when ``||F(u)|| <= TOL * ||u||`` in every sample (a few ulps of ``u``, whose size is that
#: of the nudging: the criterion is relative); a sample counts as converged at ``ACCEPT`` (rounding in an
#: ill-conditioned ``S`` may stop it in between).
TOL, ACCEPT = 1e-13, 1e-9
#: Newton steps at most, and halvings of one step at most.
MAX_NEWTON, MAX_HALVINGS = 50, 40


def _softplus(z):
    return np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))


def loss_potential(output, loss, z, Y):
    """Per-sample ``L(z)`` (rows are samples) of the table above."""
    if loss == "mse":
        d = activations.apply(output, z) - Y
        return 0.5 * np.einsum("ij,ij->i", d, d)
    if output == "softmax":
        top = z.max(axis=1)
        return top + np.log(np.exp(z - top[:, None]).sum(axis=1)) - np.einsum("ij,ij->i", Y, z)
    return np.sum(_softplus(z) - Y * z, axis=1)


def _phi_jacobians(output, z):
    """``J_phi`` of every sample, ``(M, n, n)``."""
    M, n = z.shape
    if output == "softmax":
        p = activations.apply(output, z)
        return np.einsum("ij,jk->ijk", p, np.eye(n)) - p[:, :, None] * p[:, None, :]
    diag = {"identity": lambda: np.ones_like(z),
            "sigmoid": lambda: activations.apply("sigmoid", z) * (1.0 - activations.apply("sigmoid", z)),
            "tanh": lambda: 1.0 - np.tanh(z) ** 2}[output]()
    return np.einsum("ij,jk->ijk", diag, np.eye(n))


def loss_curvature(output, loss, z):
    """``H`` of every sample, ``(M, n, n)`` (the table above)."""
    if loss == "cross_entropy" and output == "sigmoid":
        p = activations.apply("sigmoid", z)
        return np.einsum("ij,jk->ijk", p * (1.0 - p), np.eye(z.shape[1]))
    J = _phi_jacobians(output, z)
    if loss == "cross_entropy":      # softmax: diag(p) - p p^T, its own Jacobian
        return J
    return np.einsum("sji,sjk->sik", J, J)


@dataclass
class OutputSolution:
    """The nudged output of every sample.

    Attributes
    ----------
    u : ndarray, shape (M, n_out)
        The multipliers: the edge residuals are ``J^T u``.
    z : ndarray, shape (M, n_out)
        The output pre-activation ``f + S u``.
    iterations : int
        Newton steps of the slowest sample.
    converged : ndarray of bool, shape (M,)
    """

    u: np.ndarray
    z: np.ndarray
    iterations: int
    converged: np.ndarray


def _residual(output, loss, f, S, Y, b, u):
    z = f + np.einsum("sij,sj->si", S, u)
    pull, _ = loss_pull(output, loss, z, Y)
    return z, u - b * pull           # the pull is -grad L


def solve_output(output, loss, f, S, Y, b):
    """:class:`OutputSolution` of ``F(u) = u + b grad L(f + S u) = 0`` for every sample (rows).

    Examples
    --------
    >>> import numpy as np
    >>> f, S, Y = np.array([[1.0, 0.0]]), np.eye(2)[None] * 3.0, np.array([[0.0, 1.0]])
    >>> sol = solve_output("identity", "mse", f, S, Y, 0.5)      # (I + b S) u = -b (f - y)
    >>> sol.u.round(12).tolist(), sol.iterations
    ([[-0.2, 0.2]], 1)
    """
    M, n = f.shape
    pull, _ = loss_pull(output, loss, f, Y)
    u = b * pull                     # the first-order guess, exact as b -> 0
    z, F = _residual(output, loss, f, S, Y, b, u)
    eye = np.eye(n)
    iterations = 0
    for _ in range(MAX_NEWTON):
        norm = np.linalg.norm(F, axis=1)
        todo = np.flatnonzero(norm > TOL * np.linalg.norm(u, axis=1))
        if todo.size == 0:
            break
        iterations += 1
        H = loss_curvature(output, loss, z[todo])
        step = np.linalg.solve(eye + b * H @ S[todo], -F[todo][..., None])[..., 0]
        u[todo], z[todo], F[todo] = _backtrack(output, loss, f[todo], S[todo], Y[todo], b, u[todo], step,
                                               norm[todo])
        if loss == "mse" and output == "identity":
            break                    # the problem is linear: one exact step
    converged = np.linalg.norm(F, axis=1) <= ACCEPT * np.linalg.norm(u, axis=1)
    return OutputSolution(u, z, iterations, converged)


def _backtrack(output, loss, f, S, Y, b, u, step, norm):
    """``(u, z, F)`` after ``u + t step``, ``t`` halved per sample until ``||F||`` decreases (or the cap)."""
    t = np.ones(u.shape[0])
    for _ in range(MAX_HALVINGS):
        trial = u + t[:, None] * step
        z, F = _residual(output, loss, f, S, Y, b, trial)
        worse = ~(np.linalg.norm(F, axis=1) < norm)
        if not worse.any():
            break
        t[worse] *= 0.5
    return trial, z, F
