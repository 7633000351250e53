"""Forward-Euler kernel of the restricted sheaf heat equation (numba, no Python per step).

The state ``S`` is ``(n_rows, M)`` in the layout's free order, samples as
columns (see :mod:`sheaflinalg.kernels.force`).  Every step sweeps the batch
in tiles of samples (one tile unless the batch overflows the L2 cache, see
:func:`~sheaflinalg.kernels.force.tile_width`); for each tile:

1. ``compute_forces`` (the one force routine) gives the edge discrepancies
   ``E`` and the force ``F = -grad(discord)`` with the mask ``z >= 0`` of the
   current state;
2. soft-pin edges add ``-gamma (s - p)`` and reluctance edges
   ``-lam (s - anchor)`` on the rows they touch;
3. on recording steps the discord by edge block, the output rows and the
   states of selected samples are stored;
4. rows listed in ``update_rows`` (the free coordinates: hard-pinned rows
   are simply not listed) move by ``alpha dt F``; changes >= ``tol`` are counted.

After the last tile:

5. hidden pre-activations whose sign (``z >= 0``) changed are logged as
   boundary crossings, and repeated flips of one coordinate within
   ``slide_window`` steps are merged into sliding episodes.

The kernel is resumable: all counters live in ``counters`` so that a driver
can call it in chunks (for a progress bar) without changing the result.
"""

import numpy as np
from numba import njit

from .force import compute_forces, compute_forces_range, discord_by_edge_block, tile_width

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
N_COUNTERS = 6

# Below this many samples the row-wise vectorised helpers cost more than plain loops.
SMALL_BATCH = 16


@njit(cache=True, fastmath={"reassoc"})
def _update_range(S, F, update_rows, adt, tol, s0, s1):
    # Euler update of the listed rows, samples s0 <= s < s1; returns (number
    # of changes >= tol, sum of changes).  Both reductions are sums so that
    # they vectorise ("reassoc" only reorders the sums; the update itself is
    # elementwise and exact).  A float max reduction does not vectorise, so
    # the largest change is computed once, after the run, by the driver.
    big = 0.0
    sm = 0.0
    for i in range(update_rows.shape[0]):
        r = update_rows[i]
        for s in range(np.uint64(s0), np.uint64(s1)):
            d = adt * F[r, s]
            S[r, s] += d
            sm += d
            big += np.float64(abs(d) >= tol)  # a branch here would stop vectorisation
    return big, sm


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


@njit(cache=True, nogil=True)
def heat_run(X, S, theta, dims, zoff, aoff, woff, boff, yhat_off, out_mode, phi_code,
             adt, stop_at, tol, update_rows, soft_rows, soft_targets, soft_gamma, rel_lam, rel_anchor,
             record_every, edge_offsets, edge_sizes, out_off, n_out, rec_samples,
             rec_steps, rec_discord, rec_sample_discord, rec_output, rec_states,
             track_crossings, hid_rows, hid_layer, hid_neuron, slide_window, slide_min,
             cross_buf, episode_buf, prev_mask, cur_mask, prev_words, cur_words, last_cross, ep_start,
             ep_count,
             F, E, phi_buf, work, blk_buf, counters, tile=0):
    """Run Euler steps until ``counters[C_STEPS] == stop_at``, convergence or a non-finite value.

    On return ``F`` holds the forces of the last step taken (the driver
    computes the largest change ``max |adt F|`` from it).
    Records are taken at steps ``0, record_every, 2 record_every, ...``
    (``record_every <= 0``: none); the driver records the final state with
    :func:`heat_finish`.  ``tile``: samples per tile (0: :func:`~sheaflinalg.kernels.force.tile_width`);
    the result does not depend on it.
    """
    M = S.shape[1]
    n_hid = hid_rows.shape[0]
    T = tile if tile > 0 else tile_width(dims, S.shape[0], M)
    while counters[C_STEPS] < stop_at:
        step = counters[C_STEPS]
        # Samples are independent: sweep the batch tile by tile (forces, then
        # the update of the tile), so that a tile's rows stay in cache.  A
        # record needs E and S of all samples before the update: one tile then.
        recording = record_every > 0 and step % record_every == 0
        width = M if recording else T
        n_big = 0.0
        dsum = 0.0
        for t0 in range(0, M, width):
            t1 = min(t0 + width, M)
            compute_forces_range(X, S, theta, dims, zoff, aoff, woff, boff, yhat_off,
                                 out_mode, phi_code, 0, 0.0, F, E, phi_buf, work, t0, t1)
            _extra_forces_range(S, F, update_rows, soft_rows, soft_targets, soft_gamma, rel_lam, rel_anchor,
                                t0, t1)
            if recording:
                _record(step, S, E, update_rows, soft_rows, soft_targets, soft_gamma, rel_lam, rel_anchor,
                        edge_offsets, edge_sizes, yhat_off, out_off, n_out, rec_samples,
                        rec_steps, rec_discord, rec_sample_discord, rec_output, rec_states, blk_buf,
                        counters)
            nb, sm = _update_range(S, F, update_rows, adt, tol, t0, t1)
            n_big += nb
            dsum += sm
        step += 1
        counters[C_STEPS] = step
        # NaN/Inf in any change propagate into dsum.
        if not (dsum - dsum == 0.0):
            counters[C_STATUS] = STATUS_NONFINITE
            return
        if track_crossings:
            if M >= SMALL_BATCH:
                # Vectorised mask, then compare 8 samples at a time through uint64
                # views of the (padded) masks; only changed words are scanned.
                for h in range(n_hid):
                    r = hid_rows[h]
                    for s in range(M):
                        cur_mask[h, s] = np.uint8(S[r, s] >= 0)
                    for w in range(cur_words.shape[1]):
                        if cur_words[h, w] != prev_words[h, w]:
                            for s in range(8 * w, min(8 * w + 8, M)):
                                m = cur_mask[h, s]
                                if m != prev_mask[h, s]:
                                    _log_crossing(h, s, m, step, hid_layer, hid_neuron, slide_window,
                                                  slide_min, cross_buf, episode_buf, last_cross, ep_start,
                                                  ep_count, counters)
                            prev_words[h, w] = cur_words[h, w]
            else:
                for h in range(n_hid):
                    r = hid_rows[h]
                    for s in range(M):
                        m = np.uint8(S[r, s] >= 0)
                        if m != prev_mask[h, s]:
                            prev_mask[h, s] = m
                            _log_crossing(h, s, m, step, hid_layer, hid_neuron, slide_window, slide_min,
                                          cross_buf, episode_buf, last_cross, ep_start, ep_count, counters)
        if n_big == 0.0:
            counters[C_STATUS] = STATUS_CONVERGED
            return
    if counters[C_STATUS] == STATUS_RUNNING and counters[C_STEPS] >= stop_at:
        counters[C_STATUS] = STATUS_RUNNING


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
