"""Forward-Euler kernel of the restricted sheaf heat equation (numba, no Python per step).

The state ``S`` is ``(n_rows, M)`` in the layout's free order, samples as
columns (see :mod:`sheaflinalg.kernels.force`).  Each step writes the new
state into a second buffer (the buffers then swap) and sweeps the batch in
tiles of samples (one tile unless the batch overflows the L2 cache, see
:func:`~sheaflinalg.kernels.force.tile_width`).  For each tile:

* plain steps: :func:`~sheaflinalg.kernels.force.force_sweep` (the one force
  routine) applies the step ``S_new = S + alpha dt F`` with the mask
  ``z >= 0`` of the current state, without storing forces, counting the
  changes ``>= tol`` and flagging the rows where some sample changed sign;
* steps with soft pins or reluctance edges (extra forces ``-gamma (s - p)``,
  ``-lam (s - anchor)``) and recording steps: the same routine stores the
  edge discrepancies ``E`` and forces ``F``, the extra forces are added, the
  discord by edge block, the output rows and the states of selected samples
  are recorded, and the step is applied from ``F``.

Hard-pinned rows get a zero step (``scale``).  After the step, hidden
pre-activations whose sign (``z >= 0``) changed are logged as boundary
crossings (only flagged rows are scanned, 16 samples at a time), and repeated flips
of one coordinate within ``slide_window`` steps are merged into sliding
episodes.

The kernel is resumable: all counters live in ``counters`` so that a driver
can call it in chunks (for a progress bar) without changing the result.
"""

import numpy as np
from numba import njit

from .force import (compute_forces, discord_by_edge_block, force_sweep, force_sweep_blas, step_rows, stored_forces,
                    tile_width)

STATUS_RUNNING = 0
STATUS_CONVERGED = 1
STATUS_MAX_STEPS = 2
STATUS_NONFINITE = 3

# counters[...] slots
C_STEPS = 0        # Euler steps taken
C_NREC = 1         # records written
C_NCROSS = 2       # crossings seen (may exceed the buffer)
C_NEP = 3          # sliding episodes seen (may exceed the buffer)
C_STATUS = 4
C_LASTREC = 5      # step of the last record (-1: none)
C_QUIET = 6        # 1 if no change of the last step taken was >= tol
N_COUNTERS = 7


@njit(cache=True)
def _has_nonfinite(S):
    # Whether any entry is NaN or Inf.
    for r in range(S.shape[0]):
        for s in range(S.shape[1]):
            v = S[r, s]
            if not (v - v == 0.0):
                return True
    return False


@njit(cache=True)
def _extra_forces(S, F, update_rows, soft_rows, soft_targets, soft_gamma, rel_lam, rel_anchor):
    _extra_forces_range(S, F, update_rows, soft_rows, soft_targets, soft_gamma, rel_lam, rel_anchor,
                        0, S.shape[1])


@njit(cache=True)
def _extra_forces_range(S, F, update_rows, soft_rows, soft_targets, soft_gamma, rel_lam, rel_anchor, s0, s1):
    for i in range(soft_rows.shape[0]):
        r = soft_rows[i]
        g = soft_gamma[i]
        for s in range(np.uint64(s0), np.uint64(s1)):
            F[r, s] -= g * (S[r, s] - soft_targets[i, s])
    if rel_lam > 0.0:
        for i in range(update_rows.shape[0]):
            r = update_rows[i]
            for s in range(np.uint64(s0), np.uint64(s1)):
                F[r, s] -= rel_lam * (S[r, s] - rel_anchor[r, s])


@njit(cache=True)
def _record(step, S, E, update_rows, soft_rows, soft_targets, soft_gamma, rel_lam, rel_anchor,
            edge_offsets, edge_sizes, yhat_off, out_off, n_out, rec_samples,
            rec_steps, rec_discord, rec_sample_discord, rec_output, rec_states, blk_buf, counters):
    i = counters[C_NREC]
    if i >= rec_steps.shape[0]:
        return
    M = S.shape[1]
    nb = edge_offsets.shape[0]
    discord_by_edge_block(E, edge_offsets, edge_sizes, yhat_off, 0, 0.0, blk_buf)
    for s in range(M):
        rec_sample_discord[i, s] = 0.0
    for b in range(nb):
        tot = 0.0
        for s in range(M):
            tot += blk_buf[b, s]
            rec_sample_discord[i, s] += blk_buf[b, s]
        rec_discord[i, b] = tot
    tot = 0.0
    for j in range(soft_rows.shape[0]):
        r = soft_rows[j]
        g = 0.5 * soft_gamma[j]
        for s in range(M):
            d = S[r, s] - soft_targets[j, s]
            v = g * d * d
            tot += v
            rec_sample_discord[i, s] += v
    rec_discord[i, nb] = tot
    tot = 0.0
    if rel_lam > 0.0:
        for j in range(update_rows.shape[0]):
            r = update_rows[j]
            for s in range(M):
                d = S[r, s] - rel_anchor[r, s]
                v = 0.5 * rel_lam * d * d
                tot += v
                rec_sample_discord[i, s] += v
    rec_discord[i, nb + 1] = tot
    for j in range(n_out):
        for s in range(M):
            rec_output[i, j, s] = S[out_off + j, s]
    for j in range(rec_samples.shape[0]):
        s = rec_samples[j]
        for r in range(S.shape[0]):
            rec_states[i, j, r] = S[r, s]
    rec_steps[i] = step
    counters[C_NREC] = i + 1
    counters[C_LASTREC] = step


def _heat_run(X, S, theta, dims, zoff, aoff, woff, boff, yhat_off, out_mode, phi_code,
              stop_at, tol, update_rows, soft_rows, soft_targets, soft_gamma, rel_lam, rel_anchor,
              record_every, edge_offsets, edge_sizes, out_off, n_out, rec_samples,
              rec_steps, rec_discord, rec_sample_discord, rec_output, rec_states,
              track_crossings, hid_rows, hid_layer, hid_neuron, slide_window, slide_min,
              cross_buf, episode_buf, last_cross, ep_start, ep_count,
              F, E, phi_buf, work, blk_buf, counters, S_prev, flips, scale, blas, tile, stop_when_quiet):
    """Run Euler steps until ``counters[C_STEPS] == stop_at``, convergence or a non-finite value.

    Convergence (no change ``>= tol`` in a step) stops the run only when
    ``stop_when_quiet``; either way ``counters[C_QUIET]`` tells whether the
    last step taken was quiet (drivers running the batch in parts use this).

    Each step writes the new state into a second buffer (the two swap), so
    the fused path of :func:`~sheaflinalg.kernels.force.force_sweep` applies
    it without storing forces.  On return ``S`` holds the latest state and,
    if a step was taken, ``F`` the forces of the last step (the driver
    computes the largest change ``max |adt F|`` from it).
    Records are taken at steps ``0, record_every, 2 record_every, ...``
    (``record_every <= 0``: none); the driver records the final state with
    :func:`heat_finish`.  ``tile``: samples per tile (0: :func:`~sheaflinalg.kernels.force.tile_width`);
    the result does not depend on it.

    The caller provides the second state buffer ``S_prev``, the row flags
    ``flips`` (int64) and ``scale`` (``alpha dt`` on the rows that move, 0
    on pinned rows), so that nothing is allocated here: ``heat_run`` is
    compiled without numba's reference counting and without BLAS
    (``blas=None``), ``heat_run_blas`` with both (``blas=True``, for whole
    batches of big layers, see :func:`~sheaflinalg.kernels.force.uses_blas`).
    """
    M = S.shape[1]
    n_rows = S.shape[0]
    n_hid = hid_rows.shape[0]
    T = tile if tile > 0 else tile_width(dims, n_rows, M)
    # Soft pins and reluctance edges add forces the fused step does not know: stored forces then.
    fused = soft_rows.shape[0] == 0 and rel_lam <= 0.0
    Sa = S          # current state
    Sb = S_prev     # receives the next one
    taken = 0
    while counters[C_STEPS] < stop_at:
        step = counters[C_STEPS]
        # Samples are independent: sweep the batch tile by tile, so that a
        # tile's rows stay in cache.  A record needs E and S of all samples
        # before the step: one tile then.
        recording = record_every > 0 and step % record_every == 0
        width = M if recording else T
        n_big = 0.0
        dsum = 0.0
        for t0 in range(0, M, width):
            t1 = min(t0 + width, M)
            if fused and not recording:
                if blas is not None:
                    nb, sm = force_sweep_blas(X, Sa, Sb, theta, dims, zoff, aoff, woff, boff, yhat_off,
                                              out_mode, phi_code, 0, 0.0, F, E, phi_buf, work, t0, t1,
                                              scale, tol, None, False, flips, True)
                elif track_crossings:
                    nb, sm = force_sweep(X, Sa, Sb, theta, dims, zoff, aoff, woff, boff, yhat_off,
                                         out_mode, phi_code, 0, 0.0, F, E, phi_buf, work, t0, t1,
                                         scale, tol, None, False, flips, None)
                else:
                    nb, sm = force_sweep(X, Sa, Sb, theta, dims, zoff, aoff, woff, boff, yhat_off,
                                         out_mode, phi_code, 0, 0.0, F, E, phi_buf, work, t0, t1,
                                         scale, tol, None, False, None, None)
            else:
                stored_forces(X, Sa, theta, dims, zoff, aoff, woff, boff, yhat_off,
                              out_mode, phi_code, 0, 0.0, F, E, phi_buf, work, t0, t1, blas)
                _extra_forces_range(Sa, F, update_rows, soft_rows, soft_targets, soft_gamma, rel_lam,
                                    rel_anchor, t0, t1)
                if recording:
                    _record(step, Sa, E, update_rows, soft_rows, soft_targets, soft_gamma, rel_lam, rel_anchor,
                            edge_offsets, edge_sizes, yhat_off, out_off, n_out, rec_samples,
                            rec_steps, rec_discord, rec_sample_discord, rec_output, rec_states, blk_buf,
                            counters)
                nb, sm = step_rows(Sa, Sb, F, 0, n_rows, scale, tol, flips, t0, t1)
            n_big += nb
            dsum += sm
        Sa, Sb = Sb, Sa
        taken += 1
        step += 1
        counters[C_STEPS] = step
        # NaN/Inf in any change propagate into dsum; the sum of finite changes can
        # also overflow, so only a non-finite value in the state counts (the step
        # then does not depend on how the batch is split into parts).
        if not (dsum - dsum == 0.0) and _has_nonfinite(Sa):
            counters[C_STATUS] = STATUS_NONFINITE
            break
        if track_crossings:
            # Sign changes between the state before the step (now in Sb) and after it (Sa).
            for h in range(n_hid):
                r = hid_rows[h]
                if flips[r] == 0:
                    continue
                # Blocks of 16 samples: a branch-free test per block, the scan only where it changed.
                for b0 in range(0, M, 16):
                    b1 = min(b0 + 16, M)
                    changed = False
                    for s in range(b0, b1):
                        changed |= (Sa[r, s] >= 0) ^ (Sb[r, s] >= 0)
                    if not changed:
                        continue
                    for s in range(b0, b1):
                        now = Sa[r, s] >= 0
                        if now != (Sb[r, s] >= 0):
                            _log_crossing(h, s, np.uint8(now), step, hid_layer, hid_neuron, slide_window,
                                          slide_min, cross_buf, episode_buf, last_cross, ep_start, ep_count,
                                          counters)
        counters[C_QUIET] = 1 if n_big == 0.0 else 0
        if n_big == 0.0 and stop_when_quiet:
            counters[C_STATUS] = STATUS_CONVERGED
            break
    if taken == 0:
        return
    if taken % 2 == 1:
        # The latest state is in S_prev: swap the buffers' contents.
        for r in range(n_rows):
            for s in range(M):
                v = S[r, s]
                S[r, s] = S_prev[r, s]
                S_prev[r, s] = v
    # Forces of the last step (the state before it), as the step used them.
    stored_forces(X, S_prev, theta, dims, zoff, aoff, woff, boff, yhat_off,
                  out_mode, phi_code, 0, 0.0, F, E, phi_buf, work, 0, M, blas)
    _extra_forces(S_prev, F, update_rows, soft_rows, soft_targets, soft_gamma, rel_lam, rel_anchor)


heat_run = njit(cache=True, nogil=True, _nrt=False)(_heat_run)
heat_run_blas = njit(cache=True, nogil=True)(_heat_run)


@njit(cache=True)
def _log_crossing(h, s, m, step, hid_layer, hid_neuron, slide_window, slide_min, cross_buf, episode_buf,
                  last_cross, ep_start, ep_count, counters):
    c = counters[C_NCROSS]
    if c < cross_buf.shape[0]:
        cross_buf[c, 0] = step
        cross_buf[c, 1] = s
        cross_buf[c, 2] = hid_layer[h]
        cross_buf[c, 3] = hid_neuron[h]
        cross_buf[c, 4] = m
    counters[C_NCROSS] = c + 1
    if ep_count[h, s] > 0 and step - last_cross[h, s] <= slide_window:
        ep_count[h, s] += 1
    else:
        _close_episode(h, s, hid_layer, hid_neuron, slide_min, ep_start, ep_count, last_cross,
                       episode_buf, counters)
        ep_start[h, s] = step
        ep_count[h, s] = 1
    last_cross[h, s] = step


@njit(cache=True)
def _close_episode(h, s, hid_layer, hid_neuron, slide_min, ep_start, ep_count, last_cross,
                   episode_buf, counters):
    if ep_count[h, s] >= slide_min:
        e = counters[C_NEP]
        if e < episode_buf.shape[0]:
            episode_buf[e, 0] = s
            episode_buf[e, 1] = hid_layer[h]
            episode_buf[e, 2] = hid_neuron[h]
            episode_buf[e, 3] = ep_start[h, s]
            episode_buf[e, 4] = last_cross[h, s]
            episode_buf[e, 5] = ep_count[h, s]
        counters[C_NEP] = e + 1
    ep_count[h, s] = 0


@njit(cache=True)
def heat_finish(X, S, theta, dims, zoff, aoff, woff, boff, yhat_off, out_mode, phi_code,
                update_rows, soft_rows, soft_targets, soft_gamma, rel_lam, rel_anchor,
                record_every, edge_offsets, edge_sizes, out_off, n_out, rec_samples,
                rec_steps, rec_discord, rec_sample_discord, rec_output, rec_states,
                track_crossings, hid_layer, hid_neuron, slide_min,
                episode_buf, last_cross, ep_start, ep_count,
                F, E, phi_buf, work, blk_buf, counters):
    """Final forces/discrepancies (``F``, ``E`` of the final state), final record, open episodes closed."""
    compute_forces(X, S, theta, dims, zoff, aoff, woff, boff, yhat_off,
                   out_mode, phi_code, 0, 0.0, F, E, phi_buf, work)
    _extra_forces(S, F, update_rows, soft_rows, soft_targets, soft_gamma, rel_lam, rel_anchor)
    step = counters[C_STEPS]
    if record_every > 0 and counters[C_LASTREC] != step:
        _record(step, S, E, update_rows, soft_rows, soft_targets, soft_gamma, rel_lam, rel_anchor,
                edge_offsets, edge_sizes, yhat_off, out_off, n_out, rec_samples,
                rec_steps, rec_discord, rec_sample_discord, rec_output, rec_states, blk_buf, counters)
    if track_crossings:
        for h in range(ep_count.shape[0]):
            for s in range(ep_count.shape[1]):
                _close_episode(h, s, hid_layer, hid_neuron, slide_min, ep_start, ep_count, last_cross,
                               episode_buf, counters)
