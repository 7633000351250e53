"""Heat-equation inference: forward Euler on the restricted sheaf heat equation.

:func:`run_euler` runs ``d omega/dt = -alpha (L[Omega,Omega] omega + L[Omega,U] u)``
(paper eq. neural-restricted) with the state-dependent ReLU sheaf (mask
``z >= 0`` of the current state, recomputed every step) for a batch of
independent samples; nonlinear outputs use the output vertex and the local
adjoint (eq. final-dynamics).  The whole time loop is the numba kernel
:func:`sheaflinalg.kernels.heat.heat_run`, on parts of the batch (:mod:`.parts`).
"""

import numpy as np

from ..._common.memory import check_memory
from ..._common.progress import progress_bar
from ...kernels import force as _force
from ...kernels import heat as _kheat
from ...sheaf.state import to_rows
from . import parts as _parts
from .result import HeatHistory, HeatResult, NonFiniteStateError


def check_stable(problem, settings):
    """Refuse an unstable ``dt`` (unless ``check_stability=False``), with the largest stable one."""
    alpha, dt, bound = problem.settings.alpha, settings.dt, problem.bound
    if settings.check_stability and alpha * dt * bound >= 2.0:
        raise ValueError(
            f"dt={dt:g} is unstable for explicit Euler: alpha*dt*lambda_max must be < 2, and "
            f"lambda_max(L[Omega,Omega]) <= {bound:.6g} (norm bound (1 + max(1, ||W_l||_2))^2 "
            f"+ max gamma + lambda, valid for every activation pattern); the largest stable dt "
            f"is {2.0 / (alpha * bound):.6g} (pass check_stability=False to run anyway)")


def _output_mode(net, reduced, output_force):
    if reduced:
        return _force.OUTPUT_EDGE_NONE
    return _force.OUTPUT_EDGE_ADJOINT if output_force == "adjoint" else _force.OUTPUT_EDGE_DISCREPANCY


def _hidden_units(net, off):
    """Free rows, layers and neuron indices of every hidden pre-activation."""
    hid_rows, hid_layer, hid_neuron = [], [], []
    for l in range(1, len(net.dims) - 1):
        zo = off["zoff"][l]
        for j in range(net.dims[l]):
            hid_rows.append(zo + j)
            hid_layer.append(l)
            hid_neuron.append(j)
    return (np.asarray(hid_rows, dtype=np.int64), np.asarray(hid_layer, dtype=np.int64),
            np.asarray(hid_neuron, dtype=np.int64))


def _kernel_arguments(problem, settings):
    """The arguments every part passes unchanged (``shared``) and the per-sample columns."""
    net, lay, hard, soft, lam, anchor = (problem.net, problem.layout, problem.hard, problem.soft, problem.lam,
                                         problem.anchor)
    M = problem.n_samples
    alpha, dt, tol = problem.settings.alpha, settings.dt, problem.settings.tol
    record_every, crossings = settings.record_every, settings.crossings
    sliding_window, sliding_min_flips = settings.sliding_window, settings.sliding_min_flips
    off = lay.kernel_offsets()
    theta = net.parameters()
    out_mode = _output_mode(net, lay.reduced, settings.output_force)
    phi_code = _force.PHI_CODES[net.output]
    n_out = net.dims[-1]
    out_off = lay.free(lay.output_block).start
    upd = np.ones(lay.n_free, dtype=bool)
    upd[hard.index] = False
    update_rows = np.flatnonzero(upd).astype(np.int64)
    soft_rows = soft.index.astype(np.int64)
    soft_targets = np.ascontiguousarray(soft.values.T)
    soft_gamma = np.ascontiguousarray(soft.gamma)
    rel_anchor = np.ascontiguousarray(anchor.T) if anchor is not None else np.zeros((lay.n_free, M))
    hid_rows, hid_layer, hid_neuron = _hidden_units(net, off)
    shared = dict(
        theta=theta, dims=off["dims"], zoff=off["zoff"], aoff=off["aoff"], woff=off["woff"], boff=off["boff"],
        yhat_off=off["yhat_off"], out_mode=out_mode, phi_code=phi_code, adt=alpha * dt, tol=tol,
        update_rows=update_rows, soft_rows=soft_rows, soft_gamma=soft_gamma, lam=lam, record_every=record_every,
        edge_offsets=off["edge_offsets"], edge_sizes=off["edge_sizes"], out_off=out_off, n_out=n_out,
        crossings=bool(crossings), hid_rows=hid_rows,
        hid_layer=hid_layer, hid_neuron=hid_neuron,
        sliding_window=sliding_window, sliding_min_flips=sliding_min_flips)
    columns = (("Xc", problem.X.T), ("S", problem.S0), ("soft_targets", soft_targets), ("rel_anchor", rel_anchor))
    return shared, columns


def _make_parts(problem, settings, shared, columns):
    """The batch's parts (:class:`~.parts.HeatPart`), after the memory check of their crossing logs."""
    M, max_crossings = problem.n_samples, settings.max_crossings
    crossings = settings.crossings
    n_rec = 2 if settings.record_every > 0 else 0     # grown with the run (HeatPart.reserve_records)
    max_episodes = max(1000, max_crossings // 4) if crossings else 0
    n_parts = _parts.part_count(M)
    log_bytes = n_parts * 8 * (5 * (max_crossings if crossings else 0) + 6 * max_episodes)
    check_memory(log_bytes, f"the crossing logs of max_crossings={max_crossings}", "lower max_crossings")
    cuts = np.linspace(0, M, n_parts + 1).round().astype(int)
    n_blocks = len(problem.layout.edge_blocks)
    return [_parts.HeatPart(lo, hi, shared, columns, settings.record_states, n_rec, n_blocks,
                            max_crossings if crossings else 0, max_episodes, shared["hid_rows"].size,
                            max(problem.net.dims))
            for lo, hi in zip(cuts[:-1], cuts[1:])], max_episodes


def run_euler(problem, settings):
    """Forward Euler from ``problem`` (:class:`~sheaflinalg.dynamics.problem.HeatProblem`) with
    ``settings`` (:class:`~.settings.EulerSettings`); see :func:`sheaflinalg.heat`."""
    check_stable(problem, settings)
    shared, columns = _kernel_arguments(problem, settings)
    parts, max_episodes = _make_parts(problem, settings, shared, columns)
    max_steps, alpha, dt = settings.max_steps, problem.settings.alpha, settings.dt
    show = problem.settings.progress and max_steps >= 20_000
    with progress_bar(max_steps, show, "heat", unit="step") as bar:
        status = _parts.run_parts(parts, max_steps, problem.settings.threads, settings.record_every,
                                  max(10_000, max_steps // 100) if show else None, bar.update if show else None)
    if status == _kheat.STATUS_NONFINITE:
        step = _parts.nonfinite_step(parts)
        raise NonFiniteStateError(
            f"the state became non-finite (NaN or Inf) at Euler step {step} (dt={dt:g}, alpha={alpha:g}); "
            f"reduce dt (largest dt certified stable: {2.0 / (alpha * problem.bound):.6g})")
    steps = parts[0].step
    update_rows = shared["update_rows"]
    # Each part's F holds the forces of its last step: the largest change is adt max|F| (monotone rounding).
    final_change = alpha * dt * max(float(np.abs(p.F[update_rows]).max()) for p in parts) \
        if steps and update_rows.size else (0.0 if steps else float("inf"))
    for p in parts:
        p.finish()
    return _result(problem, settings, shared, parts, status, steps, final_change, max_episodes)


def _final_discord(problem, shared, S, E):
    """Total discord of each sample's final state: edge blocks, soft pins, reluctance."""
    soft, lam = problem.soft, problem.lam
    blk = np.zeros((len(problem.layout.edge_blocks), S.shape[1]))
    _force.discord_by_edge_block(E, shared["edge_offsets"], shared["edge_sizes"], shared["yhat_off"], 0, 0.0, blk)
    disc = blk.sum(axis=0)
    if soft.size:
        disc += 0.5 * (soft.gamma[:, None] * (S[shared["soft_rows"]] - soft.values.T) ** 2).sum(axis=0)
    if lam > 0:
        rows = shared["update_rows"]
        anchor = problem.anchor.T[rows] if problem.anchor is not None else 0.0
        disc += 0.5 * lam * ((S[rows] - anchor) ** 2).sum(axis=0)
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
        states[:, p.rec_index] = p.rec_states[:nr]
    return HeatHistory(
        steps=parts[0].rec_steps[:nr].copy(),
        discord=sum(p.rec_discord[:nr] for p in parts)[:, cols],
        labels=[b.name for b in lay.edge_blocks] + (["e_pin"] if soft.size else [])
        + (["e_rel"] if lam > 0 else []),
        sample_discord=np.concatenate([p.rec_sample_discord[:nr] for p in parts], axis=1),
        output=np.ascontiguousarray(
            np.concatenate([p.rec_output[:nr] for p in parts], axis=2).transpose(0, 2, 1)),
        states=states, state_samples=rec_samples, layout=lay)


def _result(problem, settings, shared, parts, status, steps, final_change, max_episodes):
    S = np.concatenate([p.S for p in parts], axis=1)
    E = np.concatenate([p.E for p in parts], axis=1)
    out_off, n_out = shared["out_off"], shared["n_out"]
    cross, n_cross = _parts.merged_crossings(parts, settings.max_crossings if settings.crossings else 0)
    sliding, n_sliding = _parts.merged_episodes(parts, max_episodes)
    return HeatResult(
        state=to_rows(S), output=to_rows(S[out_off:out_off + n_out]), steps=steps,
        converged=status == _kheat.STATUS_CONVERGED, final_change=final_change,
        discord=_final_discord(problem, shared, S, E), edge_discrepancy=to_rows(E),
        history=_history(problem, settings, parts), crossings=cross, crossings_total=n_cross,
        sliding=sliding, sliding_total=n_sliding, layout=problem.layout, pinned=list(problem.hard.labels),
        lambda_max_bound=problem.bound, dt=settings.dt, alpha=problem.settings.alpha)
