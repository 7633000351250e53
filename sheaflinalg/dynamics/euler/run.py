"""Heat-equation inference: forward Euler on the restricted sheaf heat equation.

:func:`run_euler` runs ``d omega/dt = -alpha (L[Omega,Omega] omega + L[Omega,U] u)``
(paper eq. neural-restricted) with the state-dependent ReLU sheaf (mask
``z >= 0`` of the current state, recomputed every step) for a batch of
independent samples; nonlinear outputs use the output vertex and the local
adjoint (eq. final-dynamics).  The whole time loop is the numba kernel
:func:`sheaflinalg.kernels.heat.heat_run`, on parts of the batch (:mod:`.parts`).
"""

import numpy as np

from ..._common.progress import progress_bar
from ...kernels import potentials as _potentials
from ...kernels import heat as _kheat
from ...sheaf.state import to_rows
from . import parts as _parts
from .result import HeatHistory, HeatResult, NonFiniteStateError
from ...network.paths import GRAPH, engine


def check_stable(problem, settings):
    """Refuse an unstable ``dt`` (unless ``check_stability=False``), with the largest stable one.  (A graph with
    state-dependent nodes checks every step's state instead: :mod:`.adaptive`.)"""
    alpha, dt, bound = problem.settings.alpha, settings.dt, problem.bound
    rule = "||I + (||F_(u->v)||)||_2^2" if engine(problem.net) == GRAPH else "(1 + max(1, ||W_l||_2))^2"
    if settings.check_stability and alpha * dt * bound >= 2.0:
        raise ValueError(
            f"dt={dt:g} is unstable for explicit Euler: alpha*dt*lambda_max must be < 2, and "
            f"lambda_max(L[Omega,Omega]) <= {bound:.6g} (norm bound {rule} "
            f"+ max gamma + lambda, valid for every activation pattern); the largest stable dt "
            f"is {2.0 / (alpha * bound):.6g} (pass check_stability=False to run anyway)")


def nonfinite_error(step, dt, alpha, bound):
    """The :class:`NonFiniteStateError` of a run whose state became non-finite at Euler step ``step``."""
    return NonFiniteStateError(
        f"the state became non-finite (NaN or Inf) at Euler step {step} (dt={dt:g}, alpha={alpha:g}); "
        f"reduce dt (largest dt certified stable: {2.0 / (alpha * bound):.6g})")


def _make_parts(problem, settings):
    """The kernels' pins (:func:`~.parts.batch_pins`) and the batch's parts (:func:`~.parts.build_parts`)."""
    lay = problem.layout
    kpins = _parts.batch_pins(lay, problem.hard, problem.soft, problem.lam, problem.anchor, problem.n_samples)
    parts = _parts.build_parts(problem.net, problem.X, problem.S0, lay, kpins, settings.output_force,
                               problem.settings.alpha * settings.dt, problem.settings.tol, settings.record_every,
                               settings.record_states, settings.crossings, settings.max_crossings,
                               settings.sliding_window, settings.sliding_min_flips)
    return kpins, parts


def run_euler(problem, settings):
    """Forward Euler from ``problem`` (:class:`~sheaflinalg.dynamics.problem.HeatProblem`) with
    ``settings`` (:class:`~.settings.EulerSettings`); see :func:`sheaflinalg.heat`."""
    check_stable(problem, settings)
    kpins, parts = _make_parts(problem, settings)
    max_steps, alpha, dt = settings.max_steps, problem.settings.alpha, settings.dt
    show = problem.settings.progress and max_steps >= 20_000
    with progress_bar(max_steps, show, "heat", unit="step") as bar:
        status = _parts.run_parts(parts, max_steps, problem.settings.threads, settings.record_every,
                                  max(10_000, max_steps // 100) if show else None, bar.update if show else None)
    if status == _kheat.STATUS_NONFINITE:
        raise nonfinite_error(_parts.nonfinite_step(parts), dt, alpha, problem.bound)
    steps = parts[0].step
    update_rows = kpins.update_rows
    # Each part's F holds the forces of its last step: the largest change is adt max|F| (monotone rounding).
    final_change = alpha * dt * max(float(np.abs(p.F[update_rows]).max()) for p in parts) \
        if steps and update_rows.size else (0.0 if steps else float("inf"))
    for p in parts:
        p.finish()
    return _result(problem, settings, kpins, parts, status, steps, final_change)


def _final_discord(problem, kpins, parts, S, E):
    """Total discord of each sample's final state: edge blocks, soft pins, reluctance."""
    soft, lam = problem.soft, problem.lam
    blk = np.zeros((len(problem.layout.edge_blocks), S.shape[1]))
    _potentials.discord_by_edge_block(E, parts[0].lay, parts[0].edge, blk)
    disc = blk.sum(axis=0)
    if soft.size:
        disc += 0.5 * (soft.gamma[:, None] * (S[kpins.soft_rows] - kpins.soft_targets) ** 2).sum(axis=0)
    if lam > 0:
        rows = kpins.update_rows
        disc += 0.5 * lam * ((S[rows] - kpins.rel_anchor[rows]) ** 2).sum(axis=0)
    return disc


def _history(problem, settings, parts):
    """The records of the parts as one :class:`~.result.HeatHistory` (None without records)."""
    if settings.record_every == 0:
        return None
    lay, soft, lam, rec_samples = problem.layout, problem.soft, problem.lam, settings.record_states
    n_blocks = len(lay.edge_blocks)
    nr = int(parts[0].counters[_kheat.C_NREC])
    cols = list(range(n_blocks)) + ([n_blocks] if soft.size else []) + ([n_blocks + 1] if lam > 0 else [])
    states = np.zeros((nr, rec_samples.size, lay.n_free))
    for p in parts:
        states[:, p.rec_index] = p.rec.states[:nr]
    return HeatHistory(
        steps=parts[0].rec.steps[:nr].copy(),
        discord=sum(p.rec.discord[:nr] for p in parts)[:, cols],
        labels=[b.name for b in lay.edge_blocks] + (["e_pin"] if soft.size else [])
        + (["e_rel"] if lam > 0 else []),
        sample_discord=np.concatenate([p.rec.sample_discord[:nr] for p in parts], axis=1),
        output=np.ascontiguousarray(
            np.concatenate([p.rec.output[:nr] for p in parts], axis=2).transpose(0, 2, 1)),
        states=states, state_samples=rec_samples, layout=lay)


def _result(problem, settings, kpins, parts, status, steps, final_change):
    S = np.concatenate([p.S for p in parts], axis=1)
    E = np.concatenate([p.E for p in parts], axis=1)
    cross, n_cross = _parts.merged_crossings(parts, settings.max_crossings if settings.crossings else 0)
    sliding, n_sliding = _parts.merged_episodes(parts, parts[0].log.episodes.shape[0])
    return HeatResult(
        state=to_rows(S), output=to_rows(S[problem.layout.free(problem.layout.output_block)]), steps=steps,
        converged=status == _kheat.STATUS_CONVERGED, final_change=final_change,
        discord=_final_discord(problem, kpins, parts, S, E), edge_discrepancy=to_rows(E),
        history=_history(problem, settings, parts), crossings=cross, crossings_total=n_cross,
        sliding=sliding, sliding_total=n_sliding, layout=problem.layout, pinned=list(problem.hard.labels),
        lambda_max_bound=problem.bound, dt=settings.dt, alpha=problem.settings.alpha)
