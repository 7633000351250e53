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
can call it in chunks (for a progress bar) without changing the result.  Its
arguments are the named structures of :mod:`sheaflinalg.kernels.structs`
(layout offsets, output edge, pins, records, crossing log, buffers).
"""

import numpy as np
from numba import njit

from .force import compute_forces, force_sweep, force_sweep_blas, step_rows, stored_forces, tile_width
from .potentials import discord_by_edge_block
from .structs import heat_step

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
def _extra_forces(S, F, pins):
    _extra_forces_range(S, F, pins, 0, S.shape[1])


@njit(cache=True)
def _extra_forces_range(S, F, pins, s0, s1):
    # Soft-pin forces -gamma (s - p) and reluctance forces -lam (s - anchor) on the samples s0 <= s < s1.
    soft_rows, soft_targets, soft_gamma = pins.soft_rows, pins.soft_targets, pins.soft_gamma
    update_rows, rel_lam, rel_anchor = pins.update_rows, pins.rel_lam, pins.rel_anchor
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
def _record(step, S, E, lay, edge, pins, rec, counters):
    i = counters[C_NREC]
    if i >= rec.steps.shape[0]:
        return
    M = S.shape[1]
    nb = lay.edge_offsets.shape[0]
    blk_buf, rec_discord, rec_sample_discord = rec.blk_buf, rec.discord, rec.sample_discord
    discord_by_edge_block(E, lay, edge, blk_buf)
    for s in range(M):
        rec_sample_discord[i, s] = 0.0
    for b in range(nb):
        tot = 0.0
        for s in range(M):
            tot += blk_buf[b, s]
            rec_sample_discord[i, s] += blk_buf[b, s]
        rec_discord[i, b] = tot
    tot = 0.0
    for j in range(pins.soft_rows.shape[0]):
        r = pins.soft_rows[j]
        g = 0.5 * pins.soft_gamma[j]
        for s in range(M):
            d = S[r, s] - pins.soft_targets[j, s]
            v = g * d * d
            tot += v
            rec_sample_discord[i, s] += v
    rec_discord[i, nb] = tot
    tot = 0.0
    if pins.rel_lam > 0.0:
        for j in range(pins.update_rows.shape[0]):
            r = pins.update_rows[j]
            for s in range(M):
                d = S[r, s] - pins.rel_anchor[r, s]
                v = 0.5 * pins.rel_lam * d * d
                tot += v
                rec_sample_discord[i, s] += v
    rec_discord[i, nb + 1] = tot
    for j in range(lay.n_out):
        for s in range(M):
            rec.output[i, j, s] = S[lay.out_off + j, s]
    for j in range(rec.samples.shape[0]):
        s = rec.samples[j]
        for r in range(S.shape[0]):
            rec.states[i, j, r] = S[r, s]
    rec.steps[i] = step
    counters[C_NREC] = i + 1
    counters[C_LASTREC] = step


def _heat_run(X, S, theta, lay, edge, pins, rec, log, scratch, bufs, stop_at, tol, stop_when_quiet, blas, tile):
    """Run Euler steps until ``counters[C_STEPS] == stop_at``, convergence or a non-finite value.

    Convergence (no change ``>= tol`` in a step) stops the run only when
    ``stop_when_quiet``; either way ``counters[C_QUIET]`` tells whether the
    last step taken was quiet (drivers running the batch in parts use this).
    Each step writes the new state into a second buffer (the two swap), so
    the fused path of :func:`~sheaflinalg.kernels.force.force_sweep` applies
    it without storing forces.  On return ``S`` holds the latest state and,
    if a step was taken, ``scratch.F`` the forces of the last step (the
    driver computes the largest change ``max |adt F|`` from it).  Records
    are taken at steps ``0, rec.every, 2 rec.every, ...`` (``rec.every <=
    0``: none); the driver records the final state with :func:`heat_finish`.
    Nothing is allocated here: ``heat_run`` is compiled without numba's
    reference counting and without BLAS (``blas=None``), ``heat_run_blas``
    with both (``blas=True``, for whole batches of big layers, see
    :func:`~sheaflinalg.kernels.force.uses_blas`).

    Parameters
    ----------
    X : ndarray, shape (n_0, M)
        Inputs.
    S : ndarray, shape (n_rows, M)
        State, advanced in place.
    theta : ndarray
        Flat parameters.
    lay : KernelLayout
    edge : OutputEdge
    pins : Pins
    rec : Records
    log : CrossingLog
    scratch : Scratch
    bufs : HeatBuffers
        The second state buffer, row flags, step scale and counters.
    stop_at : int
        Step to stop at.
    tol : float
        A step is quiet when no change is ``>= tol``.
    stop_when_quiet : bool
        Stop at the first quiet step (status ``STATUS_CONVERGED``).
    blas : None or True
        Which compilation of the force routine (see above).
    tile : int
        Samples per tile (0: :func:`~sheaflinalg.kernels.force.tile_width`);
        the result does not depend on it.
    """
    M = S.shape[1]
    n_rows = S.shape[0]
    counters, scale, flips = bufs.counters, bufs.scale, bufs.flips
    T = tile if tile > 0 else tile_width(lay.dims, n_rows, M)
    # Soft pins and reluctance edges add forces the fused step does not know: stored forces then.
    fused = pins.soft_rows.shape[0] == 0 and pins.rel_lam <= 0.0
    track, hid_rows = log.track, log.hid_rows
    Sa = S               # current state
    Sb = bufs.S_prev     # receives the next one
    taken = 0
    while counters[C_STEPS] < stop_at:
        step = counters[C_STEPS]
        # Samples are independent: sweep the batch tile by tile, so that a
        # tile's rows stay in cache.  A record needs E and S of all samples
        # before the step: one tile then.
        recording = rec.every > 0 and step % rec.every == 0
        width = M if recording else T
        n_big = 0.0
        dsum = 0.0
        for t0 in range(0, M, width):
            t1 = min(t0 + width, M)
            if fused and not recording:
                if blas is not None:
                    nb, sm = force_sweep_blas(X, Sa, Sb, theta, lay, edge, scratch, t0, t1,
                                              heat_step(scale, tol, flips), True)
                elif track:
                    nb, sm = force_sweep(X, Sa, Sb, theta, lay, edge, scratch, t0, t1, heat_step(scale, tol, flips),
                                         None)
                else:
                    nb, sm = force_sweep(X, Sa, Sb, theta, lay, edge, scratch, t0, t1, heat_step(scale, tol, None),
                                         None)
            else:
                stored_forces(X, Sa, theta, lay, edge, scratch, t0, t1, blas)
                _extra_forces_range(Sa, scratch.F, pins, t0, t1)
                if recording:
                    _record(step, Sa, scratch.E, lay, edge, pins, rec, counters)
                nb, sm = step_rows(Sa, Sb, scratch.F, 0, n_rows, scale, tol, flips, t0, t1)
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
        if track:
            # Sign changes between the state before the step (now in Sb) and after it (Sa).
            for h in range(hid_rows.shape[0]):
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
                            _log_crossing(h, s, np.uint8(now), step, log, counters)
        counters[C_QUIET] = 1 if n_big == 0.0 else 0
        if n_big == 0.0 and stop_when_quiet:
            counters[C_STATUS] = STATUS_CONVERGED
            break
    if taken > 0:
        _last_forces(X, S, theta, lay, edge, pins, scratch, bufs.S_prev, taken % 2 == 1, blas)


@njit(cache=True)
def _last_forces(X, S, theta, lay, edge, pins, scratch, S_prev, swap, blas):
    """After a run: ``S`` the latest state (swapped with ``S_prev`` when it is there), and the forces
    of the last step (of the state before it, now in ``S_prev``) as the step used them."""
    if swap:
        for r in range(S.shape[0]):
            for s in range(S.shape[1]):
                v = S[r, s]
                S[r, s] = S_prev[r, s]
                S_prev[r, s] = v
    stored_forces(X, S_prev, theta, lay, edge, scratch, 0, S.shape[1], blas)
    _extra_forces(S_prev, scratch.F, pins)


heat_run = njit(cache=True, nogil=True, _nrt=False)(_heat_run)
heat_run_blas = njit(cache=True, nogil=True)(_heat_run)


@njit(cache=True)
def _log_crossing(h, s, m, step, log, counters):
    c = counters[C_NCROSS]
    if c < log.crossings.shape[0]:
        log.crossings[c, 0] = step
        log.crossings[c, 1] = s
        log.crossings[c, 2] = log.hid_layer[h]
        log.crossings[c, 3] = log.hid_neuron[h]
        log.crossings[c, 4] = m
    counters[C_NCROSS] = c + 1
    if log.ep_count[h, s] > 0 and step - log.last_cross[h, s] <= log.window:
        log.ep_count[h, s] += 1
    else:
        _close_episode(h, s, log, counters)
        log.ep_start[h, s] = step
        log.ep_count[h, s] = 1
    log.last_cross[h, s] = step


@njit(cache=True)
def _close_episode(h, s, log, counters):
    if log.ep_count[h, s] >= log.min_flips:
        e = counters[C_NEP]
        if e < log.episodes.shape[0]:
            log.episodes[e, 0] = s
            log.episodes[e, 1] = log.hid_layer[h]
            log.episodes[e, 2] = log.hid_neuron[h]
            log.episodes[e, 3] = log.ep_start[h, s]
            log.episodes[e, 4] = log.last_cross[h, s]
            log.episodes[e, 5] = log.ep_count[h, s]
        counters[C_NEP] = e + 1
    log.ep_count[h, s] = 0


@njit(cache=True)
def heat_finish(X, S, theta, lay, edge, pins, rec, log, scratch, counters):
    """Final forces/discrepancies (``scratch.F``, ``scratch.E`` of the final state), final record, open
    episodes closed.  Arguments as :func:`heat_run` (``counters``: ``bufs.counters`` there)."""
    compute_forces(X, S, theta, lay, edge, scratch)
    _extra_forces(S, scratch.F, pins)
    step = counters[C_STEPS]
    if rec.every > 0 and counters[C_LASTREC] != step:
        _record(step, S, scratch.E, lay, edge, pins, rec, counters)
    if log.track:
        for h in range(log.ep_count.shape[0]):
            for s in range(log.ep_count.shape[1]):
                _close_episode(h, s, log, counters)
