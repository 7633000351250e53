"""The heat kernel on parts of a batch, run at the same time in threads with exactly one run's result.

Samples are independent sheaves, so a batch can be cut into column ranges
("parts") that the kernel (:func:`sheaflinalg.kernels.heat.heat_run`, which
releases the GIL) advances in a pool of threads.  The cut depends on the
batch size only (:func:`part_count`), never on the thread count: threads only
decide who advances which part, so the results are the same bit for bit for
any number of threads, and more parts than threads balance the load when
other processes take some of the cores.  The kernel is called in rounds of at
most about :data:`~sheaflinalg._common.rounds.ROUND_SECONDS`, so that Ctrl-C is honoured and the record
buffers grow with the run instead of being sized by ``max_steps``.  What
couples the samples is made exact here:

* Stopping: a run converges at the first step in which no free coordinate of
  any sample changed by ``tol`` or more.  Each part stops at its own first
  quiet step; a part that stopped earlier catches up to the latest one's
  step without stopping and reports whether that step was quiet for it too.
  No step before the latest stop can be quiet for every part (the latest
  part was not quiet there), so the first step quiet for all is found.
* A non-finite value: the earliest step at which any part became non-finite.
* Records: discord totals are the sum of the parts' totals in part order;
  per-sample records, states and the
  crossing log are concatenated, the crossings in (step, layer, neuron,
  sample) order as one run writes them; sliding episodes are sorted by
  (first step, layer, neuron, sample) whatever the number of parts.
"""

import time

import numpy as np

from ..._common.blocks import BlockRunner
from ..._common.memory import check_memory
from ..._common.rounds import Rounds
from ...kernels import force as _force
from ...kernels import heat as _kheat

# Parts have at least this many samples, and there are at most MAX_PARTS of
# them.  Every part costs about 1 us per Euler step whatever its size (its
# row loops start over), 20% of a [2,30,1] x 300 step on one thread: parts
# of 128+ samples keep that cost small when one thread runs them all.
MIN_SAMPLES_PER_PART = 128
MAX_PARTS = 16


def part_count(n_samples):
    """Number of parts of a batch of ``n_samples`` (its size alone decides)."""
    return int(max(1, min(MAX_PARTS, n_samples // MIN_SAMPLES_PER_PART)))


class HeatPart:
    """The kernel's buffers and counters for the samples ``lo <= s < hi`` of a batch.

    ``shared`` holds the arguments every part passes unchanged (weights,
    offsets, step size, pins, recording settings); ``columns`` the
    per-sample arrays of the whole batch as ``(name, array)``, with samples
    on the last axis, of which the part keeps a contiguous copy of its range.
    """

    def __init__(self, lo, hi, shared, columns, rec_samples, n_rec, n_blocks, max_crossings, max_episodes,
                 n_hidden_rows, max_width):
        self.lo, self.hi = lo, hi
        m = hi - lo
        self.shared = shared
        for name, array in columns:
            setattr(self, name, np.ascontiguousarray(array[..., lo:hi]))
        local = (rec_samples >= lo) & (rec_samples < hi)
        self.rec_index = np.flatnonzero(local)                  # positions in the caller's list
        self.rec_samples = (rec_samples[local] - lo).astype(np.int64)
        n_free, n_out = self.S.shape[0], shared["n_out"]
        self.rec_steps = np.zeros(n_rec, dtype=np.int64)
        self.rec_discord = np.zeros((n_rec, n_blocks + 2))
        self.rec_sample_discord = np.zeros((n_rec, m))
        self.rec_output = np.zeros((n_rec, n_out, m))
        self.rec_states = np.zeros((n_rec, self.rec_samples.size, n_free))
        self._record_buffers = ("rec_steps", "rec_discord", "rec_sample_discord", "rec_output", "rec_states")
        self.cross_buf = np.empty((max_crossings, 5), dtype=np.int64)   # written before read
        self.episode_buf = np.empty((max_episodes, 6), dtype=np.int64)
        self.last_cross = np.zeros((n_hidden_rows, m), dtype=np.int64)
        self.ep_start = np.zeros((n_hidden_rows, m), dtype=np.int64)
        self.ep_count = np.zeros((n_hidden_rows, m), dtype=np.int64)
        self.F = np.zeros_like(self.S)
        self.E = np.zeros_like(self.S)
        self.phi_buf = np.zeros((n_out, m))
        self.work = np.zeros((max_width, m))
        self.blk_buf = np.zeros((n_blocks, m))
        self.counters = np.zeros(_kheat.N_COUNTERS, dtype=np.int64)
        self.counters[_kheat.C_LASTREC] = -1
        # The kernel allocates nothing (it runs without reference counting): its buffers.
        self.S_prev = np.empty_like(self.S)
        self.flips = np.zeros(n_free, dtype=np.int64)
        self.scale = np.zeros(n_free)
        self.scale[shared["update_rows"]] = shared["adt"]
        tile = _force.tile_width(shared["dims"], n_free, m)
        self.blas = True if _force.uses_blas(shared["dims"], m, tile) else None

    def reserve_records(self, n_rec):
        """Grow the record buffers to at least ``n_rec`` records (kept records are copied)."""
        have = self.rec_steps.shape[0]
        if n_rec <= have:
            return
        n_rec = max(n_rec, 2 * have)
        per_record = sum(getattr(self, name)[0].nbytes for name in self._record_buffers) if have else 8
        check_memory(n_rec * per_record, f"the heat history ({n_rec} records)",
                     "record less often (a larger record_every) or record fewer states")
        for name in self._record_buffers:
            old = getattr(self, name)
            new = np.zeros((n_rec,) + old.shape[1:], dtype=old.dtype)
            new[:have] = old
            setattr(self, name, new)

    @property
    def step(self):
        return int(self.counters[_kheat.C_STEPS])

    @property
    def status(self):
        return int(self.counters[_kheat.C_STATUS])

    @property
    def quiet(self):
        return bool(self.counters[_kheat.C_QUIET])

    def _common(self):
        sh = self.shared
        return (self.Xc, self.S, sh["theta"], sh["dims"], sh["zoff"], sh["aoff"], sh["woff"], sh["boff"],
                sh["yhat_off"], sh["out_mode"], sh["phi_code"])

    def run(self, stop_at, stop_when_quiet):
        """Advance to step ``stop_at`` (or this part's first quiet step, if ``stop_when_quiet``)."""
        sh = self.shared
        # Looked up at call time, so that tests can wrap the kernel.
        kernel = _kheat.heat_run_blas if self.blas else _kheat.heat_run
        kernel(*self._common(), stop_at, sh["tol"], sh["update_rows"], sh["soft_rows"],
                        self.soft_targets, sh["soft_gamma"], sh["lam"], self.rel_anchor, sh["record_every"],
                        sh["edge_offsets"], sh["edge_sizes"], sh["out_off"], sh["n_out"], self.rec_samples,
                        self.rec_steps, self.rec_discord, self.rec_sample_discord, self.rec_output,
                        self.rec_states, sh["crossings"], sh["hid_rows"], sh["hid_layer"], sh["hid_neuron"],
                        sh["sliding_window"], sh["sliding_min_flips"], self.cross_buf, self.episode_buf,
                        self.last_cross, self.ep_start, self.ep_count, self.F, self.E, self.phi_buf, self.work,
                        self.blk_buf, self.counters, self.S_prev, self.flips, self.scale, self.blas, 0,
                        stop_when_quiet)

    def finish(self):
        """Final forces, final record and open sliding episodes closed (:func:`~sheaflinalg.kernels.heat.heat_finish`)."""
        sh = self.shared
        _kheat.heat_finish(*self._common(), sh["update_rows"], sh["soft_rows"], self.soft_targets,
                           sh["soft_gamma"], sh["lam"], self.rel_anchor, sh["record_every"], sh["edge_offsets"],
                           sh["edge_sizes"], sh["out_off"], sh["n_out"], self.rec_samples, self.rec_steps,
                           self.rec_discord, self.rec_sample_discord, self.rec_output, self.rec_states,
                           sh["crossings"], sh["hid_layer"], sh["hid_neuron"], sh["sliding_min_flips"],
                           self.episode_buf, self.last_cross, self.ep_start, self.ep_count, self.F, self.E,
                           self.phi_buf, self.work, self.blk_buf, self.counters)


def run_parts(parts, max_steps, threads, record_every=0, progress_every=None, on_progress=None):
    """Advance all parts together until the run converges, reaches ``max_steps`` or goes non-finite.

    ``threads`` threads share the parts.  Each round advances every part by at
    most one round length (about 0.1 s of work, and at most
    ``progress_every`` steps when given); record buffers are grown before each
    round for ``record_every``.  Returns the final status (a ``STATUS_*`` of
    :mod:`sheaflinalg.kernels.heat`); all parts end at the same step (for a
    non-finite run: at or after the first non-finite step, see
    :func:`nonfinite_step`).
    """
    rounds = Rounds(progress_every or max_steps)
    with BlockRunner(threads, len(parts)) as runner:
        while True:
            base = parts[0].step
            if base >= max_steps:
                return _kheat.STATUS_MAX_STEPS
            target = min(max_steps, base + rounds.steps)
            if record_every > 0:
                for p in parts:
                    p.reserve_records(target // record_every + 2)
            start = time.perf_counter()
            runner.map(lambda p: p.run(target, True), parts)
            if any(p.status == _kheat.STATUS_NONFINITE for p in parts):
                return _kheat.STATUS_NONFINITE
            latest = max(p.step for p in parts)
            behind = [p for p in parts if p.step < latest]
            runner.map(lambda p: p.run(latest, False), behind)
            rounds.update(target - base, time.perf_counter() - start)
            if any(p.status == _kheat.STATUS_NONFINITE for p in parts):
                return _kheat.STATUS_NONFINITE
            if on_progress is not None:
                on_progress(latest - base)
            if all(p.quiet for p in parts):
                for p in parts:
                    p.counters[_kheat.C_STATUS] = _kheat.STATUS_CONVERGED
                return _kheat.STATUS_CONVERGED
            for p in parts:
                p.counters[_kheat.C_STATUS] = _kheat.STATUS_RUNNING


def nonfinite_step(parts):
    """The first step at which some part became non-finite (parts that stopped earlier are run up to it)."""
    first = min(p.step for p in parts if p.status == _kheat.STATUS_NONFINITE)
    for p in parts:
        if p.status != _kheat.STATUS_NONFINITE and p.step < first:
            p.run(first, False)
            if p.status == _kheat.STATUS_NONFINITE:
                first = min(first, p.step)
    return first


def _merged_log(parts, buffer, counter, sample_column, sort_columns, limit):
    """The parts' logs (``buffer`` rows written, as counted by ``counter``) with global sample
    indices, sorted by ``sort_columns`` (first = primary key), at most ``limit`` rows; and the total count."""
    logs = []
    for p in parts:
        log = getattr(p, buffer)
        rows = log[:min(int(p.counters[counter]), log.shape[0])].copy()
        rows[:, sample_column] += p.lo
        logs.append(rows)
    log = np.concatenate(logs)
    order = np.lexsort(tuple(log[:, c] for c in reversed(sort_columns)))
    return log[order][:limit], sum(int(p.counters[counter]) for p in parts)


def merged_crossings(parts, limit):
    """The parts' crossing logs in one run's order (step, layer, neuron, sample), at most ``limit``
    rows, and the number of crossings."""
    return _merged_log(parts, "cross_buf", _kheat.C_NCROSS, 1, (0, 2, 3, 1), limit)


def merged_episodes(parts, limit):
    """The parts' sliding episodes sorted by (first step, layer, neuron, sample), at most ``limit``
    rows, and the number of episodes."""
    return _merged_log(parts, "episode_buf", _kheat.C_NEP, 0, (3, 1, 2, 0), limit)
