"""The linearly implicit (Rosenbrock-Euler) heat equation of a graph network: steps, step control, result.

The heat equation of a graph network is the gradient flow ``dx/dt = -alpha grad E(x)`` of the energy
``E = 1/2 sum ||e_v||^2`` (plus the output edge, soft pins and reluctance).  Each step solves

``(I + c L(x_k)) d = c F(x_k)``, ``c = alpha dt_k``, ``x_{k+1} = x_k + d``

with ``F = -grad E`` and ``L`` the Gauss-Newton Hessian ``delta(x_k)^T delta(x_k)`` (+ soft pins and
reluctance), matrix-free by preconditioned conjugate gradients (:mod:`.system`).  ``d`` is a descent direction
(``F^T d > 0``, :func:`~.cg.pcg`); on a quadratic energy (a linear network, or one pattern) the step lowers
``E`` by ``alpha dt/2 (F^T B^{-1} F + F^T B^{-2} F)`` with ``B = I + c L`` for every ``dt``
(docs/graph-networks.md).  On a nonlinear one the step control makes it so: every sample has its own
``dt_k``; a step that does not lower the sample's energy is not taken and its ``dt`` is halved, a step taken
doubles it (up to :data:`MAX_C` for ``c``), so the energy of every sample never rises.  As ``dt`` grows the
step tends to the Gauss-Newton step ``-delta^{-1} e``, which converges quadratically to the forward pass on a
smooth network.

Near a minimum of positive energy (pins) the energy cannot see the last digits of the state: within
``sqrt(ROUNDING)`` (relative) of it a step changes ``E`` by less than its rounding.  There a step is also
taken when it leaves the energy within its rounding (:data:`ROUNDING` relative) and lowers the norm of the
force on the moving coordinates (Gauss-Newton steps do, quadratically), so that the run reaches ``tol``:
the energy never rises by more than its rounding.

A sample has converged when its step moves no free coordinate by ``tol`` or more, the change scaled by
``dt / dt_k`` where halving has brought ``dt_k`` below the first ``dt`` (a step shrunk by halving is no sign
of rest: for small ``dt`` the step is ``alpha dt F``, proportional to ``dt``); such a step is taken only if
the rule above takes it.  The run stops when every sample has converged.  The loop runs in the calling
thread: Ctrl-C stops it between two products, and leaves nothing behind (the progress bar closes).
"""

from dataclasses import dataclass

import numpy as np

from ..._common.progress import progress_bar
from ..euler.graph import StateBlock, crossing_log, final_discord, graph_setup, heat_history
from ..euler.result import HeatResult
from .system import StepSystem

#: The energy's relative rounding: a step that leaves the energy within it is judged by the force instead.
ROUNDING = 1e-13
#: The largest ``alpha dt``: beyond it the step is the Gauss-Newton step to rounding.
MAX_C = 1e12


@dataclass(kw_only=True, repr=False)
class ImplicitHeatResult(HeatResult):
    """Result of :func:`~sheaflinalg.heat` with ``method="implicit"``: a
    :class:`~sheaflinalg.dynamics.euler.result.HeatResult` (``steps`` the implicit steps, ``dt`` the first
    step's) with the steps of every sample.

    Attributes
    ----------
    dts : ndarray, shape (steps, n_samples)
        The ``dt`` each sample's step ``k`` tried.
    taken : ndarray of bool, shape (steps, n_samples)
        Whether it was taken (it lowered the energy, or kept it within its rounding and lowered the force).
    energies : ndarray, shape (steps + 1, n_samples)
        Every sample's energy (total discord) at the start and after every step: never rising by more than
        its rounding (:data:`ROUNDING` relative).
    cg_iterations : ndarray of int, shape (steps,)
        Conjugate-gradient iterations of each step (the batch's slowest sample).
    """

    method = "implicit"

    taken: np.ndarray = None
    energies: np.ndarray = None
    cg_iterations: np.ndarray = None

    def __repr__(self):
        iterations = int(self.cg_iterations.sum()) if self.cg_iterations is not None else 0
        return f"Implicit{super().__repr__()[:-1]}, cg_iterations={iterations})"


class _Run:
    """The state of a run: the batch's block, its forces, residuals, pattern and energy, every sample's ``dt``."""

    def __init__(self, problem, settings):
        self.problem, self.settings = problem, settings
        self.setup = graph_setup(problem, settings)
        self.S = np.ascontiguousarray(problem.S0.T)
        self.block = StateBlock(self.setup, problem, self.S, 0, self.S.shape[0], settings.record_states)
        self.F, self.E, self.pattern, self.energy = self.measure(self.block)
        self.dt = np.full(self.S.shape[0], settings.dt)
        self.dts, self.taken, self.energies, self.iterations = [], [], [self.energy.copy()], []
        self.log_crossings(0)

    def measure(self, block):
        """``(F, E, pattern, energy)`` of ``block``'s state (non-finite values give a NaN energy)."""
        with np.errstate(over="ignore", invalid="ignore"):
            F, E, pattern = block.forces(edges=True)
            return F, E, pattern, final_discord(self.problem, self.setup, block.S, E)

    def step(self, k):
        """Implicit step ``k`` (0-based) of every sample; returns the largest change of a coordinate (``inf`` if a
        step neither taken nor below ``tol`` was refused) and whether every sample has converged."""
        alpha, first = self.problem.settings.alpha, self.settings.dt
        system = StepSystem(self.setup, self.problem.layout, self.pattern, self.S, self.problem.settings.threads)
        d, iterations = system.solve(self.F, alpha * self.dt, self.settings.cg_tol, self.settings.cg_max_iter)
        with np.errstate(over="ignore", invalid="ignore"):
            change = np.abs(d).max(axis=1, initial=0.0)
            trial = StateBlock(self.setup, self.problem, self.S + d, 0, self.S.shape[0], self.settings.record_states)
            F, E, pattern, energy = self.measure(trial)
            lower = self.lower(energy, F)
        small = change * np.maximum(1.0, first / self.dt) < self.problem.settings.tol
        self.dts.append(self.dt.copy())
        self.taken.append(lower)
        self.iterations.append(iterations)
        self._take(lower, trial.S, F, E, pattern, energy)
        self.energies.append(self.energy.copy())
        self.dt = np.where(lower, np.minimum(2.0 * self.dt, MAX_C / alpha), 0.5 * self.dt)
        self.log_crossings(k + 1)
        return float(np.where(lower | small, change, np.inf).max(initial=0.0)), bool(small.all())

    def lower(self, energy, F):
        """Whether the trial state of ``energy`` and forces ``F`` is taken, for every sample: a lower energy,
        or one within its rounding (:data:`ROUNDING`) and a smaller force on the moving coordinates."""
        moving = self.setup.scale != 0
        smaller = np.linalg.norm(F[:, moving], axis=1) < np.linalg.norm(self.F[:, moving], axis=1)
        return (energy <= self.energy) | ((energy <= (1.0 + ROUNDING) * self.energy) & smaller)

    def _take(self, rows, S, F, E, pattern, energy):
        """Move the samples ``rows`` to the trial state (``S``, its forces, residuals, pattern, energy)."""
        self.S[rows], self.F[rows], self.E[rows], self.energy[rows] = S[rows], F[rows], E[rows], energy[rows]
        for name, values in pattern.items():
            self.pattern[name][rows] = values[rows]

    def log_crossings(self, steps):
        """Log the pattern changes of the state after ``steps`` steps (a copy: the pattern is updated in place)."""
        self.block.log_crossings(steps, {name: rows.copy() for name, rows in self.pattern.items()})


def run_graph_implicit(problem, settings):
    """The implicit scheme on a graph network from ``problem`` (:class:`~sheaflinalg.dynamics.problem.HeatProblem`)
    with ``settings`` (:class:`~.settings.ImplicitSettings`); see the module and :func:`sheaflinalg.heat`."""
    run = _Run(problem, settings)
    every, max_steps = settings.record_every, settings.max_steps
    step, converged, change = 0, False, float("inf")
    with progress_bar(max_steps, problem.settings.progress and max_steps >= 100, "heat", unit="step") as bar:
        while step < max_steps and not converged:
            if every > 0 and step % every == 0:
                run.block.record(step, run.E)
            change, converged = run.step(step)
            step += 1
            bar.update(1)
    if every > 0 and (not run.block.records or run.block.records[-1][0] != step):
        run.block.record(step, run.E)
    return _result(run, step, converged, change)


def _result(run, steps, converged, change):
    """The :class:`ImplicitHeatResult` of a finished run."""
    problem, settings, setup, block = run.problem, run.settings, run.setup, run.block
    log = crossing_log(setup, [block])
    M = run.S.shape[0]
    return ImplicitHeatResult(
        state=run.S, output=run.S[:, setup.output_slice].copy(), steps=steps, converged=converged,
        final_change=change, discord=run.energy.copy(), edge_discrepancy=run.E,
        history=heat_history(problem, settings, [block]), crossings=log, crossings_total=block.n_logged,
        sliding=None, sliding_total=None, layout=problem.layout, pinned=list(problem.hard.labels),
        lambda_max_bound=problem.bound, dt=settings.dt, alpha=problem.settings.alpha,
        dts=np.array(run.dts).reshape(steps, M), taken=np.array(run.taken, dtype=bool).reshape(steps, M),
        energies=np.array(run.energies), cg_iterations=np.array(run.iterations, dtype=np.int64))
