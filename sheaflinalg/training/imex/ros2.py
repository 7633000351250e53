"""Adaptive linearly implicit integration of the joint dynamics: the two-stage Rosenbrock-W method ROS2.

The joint dynamics ``dS/dt = alpha F(S, theta)``, ``dtheta/dt = beta V(S, theta)``
(paper eq. joint-dynamics) are stiff in the state only, through the Laplacian
``L_P`` of the frozen pattern.  ROS2 (Verwer, Spee, Blom and Hundsdorfer
1999) takes, with ``W = I + gamma h alpha L_P`` on the state and ``W = I`` on
the weights (explicit), ``gamma = 1 + 1/sqrt(2)``::

    W k1 = f(y),   W k2 = f(y + h k1) - 2 k1,   y_new = y + 3/2 h k1 + 1/2 h k2.

It is of order two for any matrix in ``W`` (a W-method), so ``L_P`` may be
that of an earlier state and step: it is factored at the start of every epoch,
after a step rejected by its error, when the step has grown by more than a
factor two or shrunk by more than five (a larger ``L_P`` only damps more), or
when :data:`REFRESH` steps were taken with it.  ``y + h k1`` is the linearly
implicit Euler step, first order; their difference ``h/2 (k1 + k2)`` is the
error estimate that sets the step (the largest of the state's and the
weights' RMS errors, each entry weighted by ``tol (1 + |y|)``).

ReLU boundaries: every force evaluation reads the pattern off its own state.
Crossing the surface ``z_j = 0`` changes the force on ``z_j`` by the
activation ``a_j``.  A step is refused when a pre-activation ends on another
side of its switching surface than at the stage ``y + h k1`` (a crossing no
force evaluation saw) and that jump, over the part ``1 - s_j`` of the step
spent on the unseen side (linear interpolation along the step), moves it by
more than the tolerance, ``alpha h |a_j| (1 - s_j) > tol (1 + |z_j|)``,
unless both one-sided forces point at the surface (a sliding mode, below).
It is retried cut at the first such crossing ``s_j`` (between a tenth and a
half of the step).  Near the equilibrium manifold ``a = relu(z)`` the jumps
vanish, so the crossings there do not stall the steps.

Sliding: a pre-activation that switched side within an accepted step where
both one-sided forces point at its surface is put onto it (``z_j = 0``,
``projections`` counts them); on the surface its force is Filippov's
(:class:`JointField`: zero while it slides) and the factorisation takes it
explicitly (its row and column of ``W`` are the identity's), so it stays
there exactly instead of chattering across, and the steps keep their order.
"""

import math

import numpy as np

from ...kernels.force import compute_forces
from ...kernels.training import weight_velocity

GAMMA = 1.0 + 1.0 / math.sqrt(2.0)
REFRESH = 10           # steps taken with one factorisation at most
SAFETY, MIN_FACTOR, MAX_FACTOR = 0.9, 0.2, 4.0
MIN_STEP = 1e-12       # relative to the span: below it the run is reported as diverged
COUNTERS = ("steps", "rejected", "boundary_cuts", "force_evaluations", "factorisations", "projections")


class JointField:
    """The right-hand side of the joint dynamics of a chain run (state rows that move, weights).

    ``run`` is a :class:`~sheaflinalg.training.euler.chain.ChainJointRun` (its inputs, offsets, output
    edge, scratch buffers and rates are read); ``z_rows``, ``a_rows`` the hidden layers' rows.  On a
    switching surface (``z_j = 0`` exactly) the force on ``z_j`` is Filippov's: the one-sided force
    ``F+ = a_j - e_j`` (active side) if it points up, ``F- = -e_j`` if it points down, else 0 (sliding);
    every other force is continuous there.
    """

    def __init__(self, run, z_rows, a_rows):
        self.X, self.off, self.edge, self.scratch = run.Xc, run.off, run.edge, run.scratch
        self.alpha, self.beta, self.n_move = run.cfg.alpha, run.cfg.beta, run.n_move
        self.z_rows, self.a_rows = z_rows, a_rows
        self.velocity = np.zeros_like(run.theta)

    def __call__(self, S, theta):
        """``(alpha F[:n_move], beta V)`` at the state ``S`` (all rows) and the weights ``theta`` (new arrays)."""
        compute_forces(self.X, S, theta, self.off, self.edge, self.scratch)
        weight_velocity(self.X, S, self.scratch.E, self.off, self.velocity)
        F = self.alpha * self.scratch.F[:self.n_move]
        on = S[self.z_rows] == 0.0
        if on.any():
            Fz = F[self.z_rows]
            up = Fz[on]                                   # the kernel reads z = 0 as active: F+
            down = up - self.alpha * S[self.a_rows][on]
            Fz[on] = np.where(up > 0, up, np.where(down < 0, down, 0.0))
            F[self.z_rows] = Fz
        return F, self.beta * self.velocity

    def attracting(self, S):
        """Hidden pre-activations whose one-sided forces at ``z = 0`` both point at the surface (``a <= e <= 0``,
        ``e`` the weight edge's residual there), read off the residuals of the last evaluation at ``S``."""
        e = self.scratch.E[self.z_rows] - S[self.z_rows]
        return (S[self.a_rows] <= e) & (e <= 0.0)


def _rms(err, y0, y1, tol):
    if err.size == 0:
        return 0.0
    scale = tol * (1.0 + np.maximum(np.abs(y0), np.abs(y1)))
    return float(np.sqrt(np.mean((err / scale) ** 2)))


class Ros2:
    """Adaptive ROS2 steps of one run: :meth:`advance` integrates a span of model time in place.

    Parameters
    ----------
    field : JointField
    operator : ChainImplicitOperator
    tol : float
        Tolerance of the error estimate.
    z_rows, a_rows : ndarray of int
        Rows of the hidden pre-activations (the ReLU switching surfaces) and of their activations.
    h0 : float
        First step tried.
    """

    def __init__(self, field, operator, tol, z_rows, a_rows, h0):
        self.field, self.op, self.tol, self.z_rows, self.a_rows = field, operator, tol, z_rows, a_rows
        self.h = float(h0)
        self.counts = dict.fromkeys(COUNTERS, 0)
        self.h_factor = None
        self.since_factor = 0

    def state(self):
        """The integrator's state for a checkpoint: the next step and the counters (floats)."""
        return np.array([self.h] + [float(self.counts[k]) for k in COUNTERS])

    def restore(self, saved):
        self.h = float(saved[0])
        self.counts = {k: int(v) for k, v in zip(COUNTERS, saved[1:])}

    def _f(self, S, theta, start=False):
        """The field at ``(S, theta)``; at the start of a step also the residuals ``e`` of the hidden ``z``."""
        self.counts["force_evaluations"] += 1
        f = self.field(S, theta)
        if start:
            self.e0 = self.field.scratch.E[self.z_rows]
        return f

    def _factor(self, S, theta, h):
        self.op.factor(S, theta, GAMMA * h * self.field.alpha)
        self.on_surface = S[self.z_rows] == 0.0
        self.h_factor, self.since_factor = h, 0
        self.counts["factorisations"] += 1

    def _stale(self, S, h):
        return (self.h_factor is None or self.since_factor >= REFRESH or not 0.2 <= h / self.h_factor <= 2.0
                or not np.array_equal(S[self.z_rows] == 0.0, self.on_surface))

    def attempt(self, S, theta, f0, h):
        """One ROS2 step of size ``h`` from ``(S, theta)`` with ``f0`` the field there.

        Returns ``(S_new, theta_new, err, cut)``: the new state (all rows) and weights, the error
        estimate (accept when ``<= 1``) and the fraction of ``h`` to retry with when the step crossed a
        ReLU boundary unseen (else None).
        """
        nm = self.field.n_move
        k1 = self.op.solve(f0[0]), f0[1]
        S2 = S.copy()
        S2[:nm] += h * k1[0]
        self.stage_side = S2[self.z_rows] >= 0
        f2 = self._f(S2, theta + h * k1[1])
        k2 = self.op.solve(f2[0] - 2.0 * k1[0]), f2[1] - 2.0 * k1[1]
        S_new = S.copy()
        S_new[:nm] += 1.5 * h * k1[0] + 0.5 * h * k2[0]
        theta_new = theta + (1.5 * h * k1[1] + 0.5 * h * k2[1])
        err = max(_rms(0.5 * h * (k1[0] + k2[0]), S[:nm], S_new[:nm], self.tol),
                  _rms(0.5 * h * (k1[1] + k2[1]), theta, theta_new, self.tol))
        return S_new, theta_new, err, self._boundary_cut(S, S2, S_new, h)

    def _boundary_cut(self, S, S2, S_new, h):
        """Fraction of the step to retry with when some pre-activation crossed its switching surface unseen
        by the force evaluations and the jump of the force there moved it by more than the tolerance."""
        z0, z2, z1 = S[self.z_rows], S2[self.z_rows], S_new[self.z_rows]
        unseen = (z1 >= 0) != (z2 >= 0)
        if not unseen.any():
            return None
        # Both one-sided forces pointing at the surface (a_j - z_j - e_j <= 0 <= -e_j, e_j the weight
        # edge's residual at the start): a Filippov sliding mode, which fine Euler follows by chattering.
        a0 = S[self.a_rows]
        unseen &= ~((a0 - z0 - self.e0 <= 0.0) & (self.e0 <= 0.0))
        if not unseen.any():
            return None
        z0, z1 = z0[unseen], z1[unseen]
        jump = np.maximum(np.abs(a0[unseen]), np.abs(S_new[self.a_rows][unseen]))
        crossed = (z1 >= 0) != (z0 >= 0)
        # Part of the step spent on the side no force evaluation saw: after the crossing, or (a crossing
        # and a return within the step) half of it.
        before = np.where(crossed, z0 / np.where(crossed, z0 - z1, 1.0), 0.5)
        wrong = self.field.alpha * h * jump * (1.0 - before) > self.tol * (1.0 + np.abs(z1))
        if not wrong.any():
            return None
        return float(np.clip(before[wrong].min(), 0.1, 0.5))

    def advance(self, S, theta, span):
        """Integrate ``span`` of model time in place; False if the step collapsed or the run stopped being finite."""
        t = 0.0
        self.h_factor = None                   # a fresh factorisation every span: resumes are exact
        f0 = self._f(S, theta, start=True)
        while t < span:
            h = min(self.h, span - t)
            clipped = h < self.h
            if self._stale(S, h):
                self._factor(S, theta, h)
            S_new, theta_new, err, cut = self.attempt(S, theta, f0, h)
            if not (np.isfinite(err) and np.all(np.isfinite(theta_new))):
                err, cut = math.inf, None
            if cut is not None or err > 1.0:
                self.counts["rejected"] += 1
                self.counts["boundary_cuts"] += cut is not None
                self.h = h * (cut if cut is not None else max(MIN_FACTOR, SAFETY * err ** -0.5))
                self.h_factor = None if cut is None else self.h_factor
                if self.h < MIN_STEP * span:
                    return False
                continue
            switched = self._switched(S, S_new, h)
            S[:], theta[:] = S_new, theta_new
            t = span if span - t - h <= 1e-12 * span else t + h
            self.counts["steps"] += 1
            self.since_factor += 1
            grow = min(MAX_FACTOR, SAFETY * err ** -0.5) if err > 0 else MAX_FACTOR
            self.h = max(self.h, h * grow) if clipped else h * grow
            f0 = self._f(S, theta, start=True)
            if self._project(S, switched):
                f0 = self._f(S, theta, start=True)
        return True

    def _switched(self, S, S_new, h):
        """Hidden pre-activations whose side changed within the step (at the stage or at its end)."""
        z0, z1 = S[self.z_rows] >= 0, S_new[self.z_rows] >= 0
        return (z0 != z1) | (z1 != self.stage_side)

    def _project(self, S, switched):
        """Put the pre-activations that switched side onto their surface where it attracts (a Filippov
        sliding mode: they stay there while it does); True if any moved."""
        onto = switched & self.field.attracting(S)
        if not onto.any():
            return False
        Z = S[self.z_rows]
        Z[onto] = 0.0
        S[self.z_rows] = Z
        self.counts["projections"] += int(onto.sum())
        return True
