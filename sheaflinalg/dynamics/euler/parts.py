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
from ...kernels import potentials as _potentials
from ...kernels import heat as _kheat
from ...kernels.structs import CrossingLog, HeatBuffers, OutputEdge, Pins, Records, Scratch

# Parts have at least this many samples, and there are at most MAX_PARTS of
# them.  Every part costs about 1 us per Euler step whatever its size (its
# row loops start over), 20% of a [2,30,1] x 300 step on one thread: parts
# of 128+ samples keep that cost small when one thread runs them all.
MIN_SAMPLES_PER_PART = 128
MAX_PARTS = 16


def part_count(n_samples):
    """Number of parts of a batch of ``n_samples`` (its size alone decides)."""
    return int(max(1, min(MAX_PARTS, n_samples // MIN_SAMPLES_PER_PART)))


def batch_pins(lay, hard, soft, lam, anchor, M):
    """The kernel's :class:`~sheaflinalg.kernels.structs.Pins` of a whole batch of ``M`` samples (resolved
    hard pins, soft pins, reluctance strength and anchor ``(M, n_free)`` or None)."""
    upd = np.ones(lay.n_free, dtype=bool)
    upd[hard.index] = False
    rel_anchor = np.ascontiguousarray(anchor.T) if anchor is not None else np.zeros((lay.n_free, M))
    return Pins(np.flatnonzero(upd).astype(np.int64), soft.index.astype(np.int64),
                np.ascontiguousarray(soft.values.T), np.ascontiguousarray(soft.gamma), lam, rel_anchor)


def output_edge(net, lay, output_force):
    """The heat equation's :class:`~sheaflinalg.kernels.structs.OutputEdge` (squared potential)."""
    if lay.reduced:
        mode = _potentials.OUTPUT_EDGE_NONE
    elif output_force == "adjoint":
        mode = _potentials.OUTPUT_EDGE_ADJOINT
    else:
        mode = _potentials.OUTPUT_EDGE_DISCREPANCY
    return OutputEdge(mode, _potentials.PHI_CODES[net.output], _potentials.LOSS_CODES["squared"], 0.0)


def build_parts(net, X, S, lay, pins, output_force, adt, tol, record_every, rec_samples, crossings, max_crossings,
                sliding_window, sliding_min_flips):
    """The parts of a heat run of ``X`` (``(M, n_0)``) from the state ``S`` (``(n_free, M)``), with the
    kernel's structures: the settings are :func:`~sheaflinalg.dynamics.heat.heat`'s, ``pins`` the
    :func:`batch_pins`.  Refuses crossing logs that would not fit in memory."""
    M = X.shape[0]
    n_parts = part_count(M)
    max_crossings = max_crossings if crossings else 0
    max_episodes = max(1000, max_crossings // 4) if crossings else 0
    log_bytes = n_parts * 8 * (5 * max_crossings + 6 * max_episodes)
    check_memory(log_bytes, f"the crossing logs of max_crossings={max_crossings}", "lower max_crossings")
    off = lay.kernel_offsets()
    hidden = [(l, j) for l in range(1, lay.n_hidden + 1) for j in range(net.dims[l])]
    hid = np.array([(off.zoff[l] + j, l, j) for l, j in hidden], dtype=np.int64).reshape(-1, 3).T.copy()
    shared = dict(theta=net.parameters(), lay=off, edge=output_edge(net, lay, output_force), pins=pins, adt=adt,
                  tol=tol, record_every=record_every,
                  log=CrossingLog(bool(crossings), hid[0], hid[1], hid[2], sliding_window, sliding_min_flips,
                                  np.empty((max_crossings, 5), dtype=np.int64),   # written before read
                                  np.empty((max_episodes, 6), dtype=np.int64), None, None, None))
    cuts = np.linspace(0, M, n_parts + 1).round().astype(int)
    return [HeatPart(lo, hi, shared, X.T, S, rec_samples) for lo, hi in zip(cuts[:-1], cuts[1:])]


class HeatPart:
    """The kernel's structures and counters for the samples ``lo <= s < hi`` of a batch.

    ``shared`` holds what every part passes unchanged (weights, layout
    offsets, output edge, step size, recording settings) and the whole
    batch's pins and crossing-log template (see :func:`build_parts`); of the
    per-sample arrays (inputs ``Xc``, state ``S``, pins) the part keeps a
    contiguous copy of its range.
    """

    def __init__(self, lo, hi, shared, Xc, S, rec_samples):
        self.lo, self.hi = lo, hi
        m = hi - lo
        self.theta, self.lay, self.edge, self.tol = shared["theta"], shared["lay"], shared["edge"], shared["tol"]
        self.Xc = np.ascontiguousarray(Xc[:, lo:hi])
        self.S = np.ascontiguousarray(S[:, lo:hi])
        pins = shared["pins"]
        self.pins = pins._replace(soft_targets=np.ascontiguousarray(pins.soft_targets[:, lo:hi]),
                                  rel_anchor=np.ascontiguousarray(pins.rel_anchor[:, lo:hi]))
        local = (rec_samples >= lo) & (rec_samples < hi)
        self.rec_index = np.flatnonzero(local)                  # positions in the caller's list
        n_free, n_out, n_blocks = self.S.shape[0], self.lay.n_out, self.lay.edge_offsets.shape[0]
        n_rec = 2 if shared["record_every"] > 0 else 0     # grown with the run (reserve_records)
        n_states = int(local.sum())
        self.rec = Records(shared["record_every"], (rec_samples[local] - lo).astype(np.int64),
                           np.zeros(n_rec, dtype=np.int64), np.zeros((n_rec, n_blocks + 2)), np.zeros((n_rec, m)),
                           np.zeros((n_rec, n_out, m)), np.zeros((n_rec, n_states, n_free)), np.zeros((n_blocks, m)))
        log = shared["log"]
        n_hidden = log.hid_rows.shape[0]
        self.log = log._replace(crossings=np.empty_like(log.crossings), episodes=np.empty_like(log.episodes),
                                last_cross=np.zeros((n_hidden, m), dtype=np.int64),
                                ep_start=np.zeros((n_hidden, m), dtype=np.int64),
                                ep_count=np.zeros((n_hidden, m), dtype=np.int64))
        self.scratch = Scratch(np.zeros_like(self.S), np.zeros_like(self.S), np.zeros((n_out, m)),
                               np.zeros((int(self.lay.dims.max()), m)))
        counters = np.zeros(_kheat.N_COUNTERS, dtype=np.int64)
        counters[_kheat.C_LASTREC] = -1
        scale = np.zeros(n_free)
        scale[self.pins.update_rows] = shared["adt"]
        # The kernel allocates nothing (it runs without reference counting): its buffers.
        self.bufs = HeatBuffers(np.empty_like(self.S), np.zeros(n_free, dtype=np.int64), scale, counters)
        tile = _force.tile_width(self.lay.dims, n_free, m)
        self.blas = True if _force.uses_blas(self.lay.dims, m, tile) else None

    _RECORD_BUFFERS = ("steps", "discord", "sample_discord", "output", "states")

    def reserve_records(self, n_rec):
        """Grow the record buffers to at least ``n_rec`` records (kept records are copied)."""
        have = self.rec.steps.shape[0]
        if n_rec <= have:
            return
        n_rec = max(n_rec, 2 * have)
        per_record = sum(getattr(self.rec, name)[0].nbytes for name in self._RECORD_BUFFERS) if have else 8
        check_memory(n_rec * per_record, f"the heat history ({n_rec} records)",
                     "record less often (a larger record_every) or record fewer states")
        grown = {}
        for name in self._RECORD_BUFFERS:
            old = getattr(self.rec, name)
            new = np.zeros((n_rec,) + old.shape[1:], dtype=old.dtype)
            new[:have] = old
            grown[name] = new
        self.rec = self.rec._replace(**grown)

    @property
    def counters(self):
        return self.bufs.counters

    @property
    def F(self):
        return self.scratch.F

    @property
    def E(self):
        return self.scratch.E

    @property
    def step(self):
        return int(self.counters[_kheat.C_STEPS])

    @property
    def status(self):
        return int(self.counters[_kheat.C_STATUS])

    @property
    def quiet(self):
        return bool(self.counters[_kheat.C_QUIET])

    def _structures(self):
        return (self.Xc, self.S, self.theta, self.lay, self.edge, self.pins, self.rec, self.log, self.scratch)

    def run(self, stop_at, stop_when_quiet):
        """Advance to step ``stop_at`` (or this part's first quiet step, if ``stop_when_quiet``)."""
        # Looked up at call time, so that tests can wrap the kernel.
        kernel = _kheat.heat_run_blas if self.blas else _kheat.heat_run
        kernel(*self._structures(), self.bufs, stop_at, self.tol, stop_when_quiet, self.blas, 0)

    def finish(self):
        """Final forces, final record and open sliding episodes closed (:func:`~sheaflinalg.kernels.heat.heat_finish`)."""
        _kheat.heat_finish(*self._structures(), self.counters)


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
        log = getattr(p.log, buffer)
        rows = log[:min(int(p.counters[counter]), log.shape[0])].copy()
        rows[:, sample_column] += p.lo
        logs.append(rows)
    log = np.concatenate(logs)
    order = np.lexsort(tuple(log[:, c] for c in reversed(sort_columns)))
    return log[order][:limit], sum(int(p.counters[counter]) for p in parts)


def merged_crossings(parts, limit):
    """The parts' crossing logs in one run's order (step, layer, neuron, sample), at most ``limit``
    rows, and the number of crossings."""
    return _merged_log(parts, "crossings", _kheat.C_NCROSS, 1, (0, 2, 3, 1), limit)


def merged_episodes(parts, limit):
    """The parts' sliding episodes sorted by (first step, layer, neuron, sample), at most ``limit``
    rows, and the number of episodes."""
    return _merged_log(parts, "episodes", _kheat.C_NEP, 0, (3, 1, 2, 0), limit)
