"""The linear system of one implicit step at a state, matrix-free: ``(I + c L) d = c F`` on the moving coordinates.

At the state ``x`` (every sample's row) ``delta = delta(x)`` is the coboundary with the pattern read off
``x`` (a smooth node's tangent at its parents' values, a rectifier's mask, a max-pool's argmax) and the
output edge's Jacobian at ``x``: the Jacobian of the residuals, unit lower triangular in the node order.
``L = delta^T delta + diag(gamma) + lambda I`` (soft pins, reluctance) is the Gauss-Newton Hessian of the
energy, ``F = -grad E(x)`` the force and ``c = alpha dt`` (one per sample).  Hard-pinned coordinates do not
move: the system is the principal one of the moving coordinates (the mask ``m``).

The preconditioner is ``P = c delta^T delta``, applied as ``P^{-1} R = delta^{-1} delta^{-T} R / c``: one
backward and one forward substitution
(:meth:`~sheaflinalg.sheaf.matrix_free.coboundary.GraphCoboundary.solve_transpose`,
:meth:`~sheaflinalg.sheaf.matrix_free.coboundary.GraphCoboundary.solve`).  Without pins
``P^{-1} (I + c L)`` has the eigenvalues ``1 + (1 + c (gamma_i + lambda)) / (c mu_i)`` over the
eigenvalues ``mu_i`` of ``delta^T delta`` (Rayleigh quotients for soft pins): all in
``[1, 1 + (1 + c (max gamma + lambda)) / (c mu_min)]``, so conjugate gradients need few iterations once
``c mu_min`` is large, and one at ``c = inf`` (the Gauss-Newton step ``-delta^{-1} e``).  With hard pins
the preconditioner is ``m P^{-1} m`` (symmetric positive definite on the moving coordinates): still a
preconditioner, without that bound.
"""

import numpy as np

from ...sheaf.matrix_free.coboundary import GraphCoboundary
from ...sheaf.patterns import output_jacobian
from .cg import pcg


class StepSystem:
    """The step's system at one state (see the module).

    Parameters
    ----------
    setup : the graph Euler run's set-up (:func:`sheaflinalg.dynamics.euler.graph.graph_setup`)
    layout : Layout
    pattern : dict
        The state's pattern rows (:class:`~sheaflinalg.sheaf.matrix_free.residuals.StateResiduals`).
    S : ndarray, shape (M, n_free)
        The state.
    threads : int
        Threads of the coboundary's products.
    """

    def __init__(self, setup, layout, pattern, S, threads):
        jacobians = None if setup.out is None else output_jacobian(setup.output, S[:, setup.out[1]])
        self.delta = GraphCoboundary(setup.sheaf.graph, pattern, jacobians=jacobians, maps=setup.sheaf.maps,
                                     layout=layout)
        self.mask = (setup.scale != 0).astype(np.float64)
        self.soft_index, self.soft_gamma, self.lam, self.threads = setup.soft_index, setup.soft_gamma, setup.lam, threads

    def laplacian(self, V):
        """``L V`` (rows)."""
        out = self.delta.apply_transpose(self.delta.apply(V, self.threads), self.threads)
        if self.soft_index.size:
            out[:, self.soft_index] += self.soft_gamma * V[:, self.soft_index]
        if self.lam > 0:
            out += self.lam * V
        return out

    def solve(self, F, c, tol, max_iter):
        """``(d, iterations)``: ``d`` solves ``(I + c L) d = c F`` on the moving coordinates to ``tol`` relative
        (:func:`~.cg.pcg`); ``c`` has one entry per row."""
        c = c[:, None]

        def apply(V):
            return self.mask * (V + c * self.laplacian(V))

        def precondition(R):
            return self.mask * self.delta.solve(self.delta.solve_transpose(self.mask * R)) / c
        return pcg(apply, precondition, c * self.mask * F, tol, max_iter)
