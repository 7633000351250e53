"""The compiled Krylov engine of the exact heat flow (:mod:`sheaflinalg.kernels.exact`), driven sample by sample.

Samples are independent: the batch is cut into blocks (their number depends on
the batch size only) that a pool of threads integrates with the compiled
:func:`~sheaflinalg.kernels.exact.driver.exact_run` (it releases the GIL), so the
results are the same bit for bit for any thread count.  The blocks advance in
rounds of about 0.1 s (a whole number of samples each), so Ctrl-C acts between
samples.  Segment and event
records go to per-block buffers that grow when full (the interrupted sample is
integrated again from its start: deterministic, so nothing changes).

A segment stores its start time, end time, start state and region only;
:meth:`KrylovSegment.states` recomputes its representation (Lanczos from the
stored start state, the same compiled code, hence the same numbers) instead of
keeping ``n x k`` numbers per segment.
"""

import time
from collections.abc import Sequence

import numpy as np

from ..._common.blocks import BlockRunner
from ..._common.progress import progress_bar
from ..._common.rounds import Rounds
from ...kernels.exact.driver import exact_run
from ...kernels.exact.krylov import segment_representation
from ...kernels.exact.structs import (C_NEV, C_NEXT, C_NSEG, C_STATUS, N_COUNTERS, OK, EventRecords, SampleResults,
                                      SegmentRecords)

# Lanczos vectors per segment before a sample is handed to the dense Python path (cost ~ n k^2 per
# segment and n k of memory; one hidden layer needs ~8 at any width, deep nets up to n).
KRYLOV_CAP = 512
MAX_BLOCKS = 16
RECORDS_PER_SAMPLE = 16     # first size of the segment and event buffers (doubled when full)


def block_bounds(n_samples):
    """Sample ranges ``[lo, hi)`` of the blocks (the batch size alone decides)."""
    n_blocks = max(1, min(MAX_BLOCKS, n_samples))
    edges = np.linspace(0, n_samples, n_blocks + 1).round().astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]


class KrylovEngine:
    """The compiled engine on one :class:`~sheaflinalg.dynamics.exact.affine.AffineField` and its hard pins."""

    def __init__(self, field, pins, alpha, kmax=None):
        self.field, self.alpha = field, float(alpha)
        self.kmax = int(KRYLOV_CAP if kmax is None else kmax)
        self.op = field.operator(pins)
        self.E = np.ascontiguousarray(field.e, dtype=np.float64)
        self.P0 = np.ascontiguousarray(field.p0, dtype=np.float64)

    def run(self, S, t_max, tol, max_events, threads, progress=False):
        """Integrate the samples (rows of ``S``); returns a :class:`KrylovRun`.

        ``progress``: a progress bar over the samples (batches of 1000 or more).
        """
        S = np.ascontiguousarray(S, dtype=np.float64)
        M, n = S.shape
        run = KrylovRun(M, n)
        blocks = [_Block(lo, hi, n, self.field.z_index.size, RECORDS_PER_SAMPLE) for lo, hi in block_bounds(M)]
        rounds = Rounds(M, first=1)     # rounds of about 0.1 s, in samples per block: Ctrl-C between them
        with BlockRunner(threads, len(blocks)) as runner, \
                progress_bar(M, progress and M >= 1000, "exact flow", unit="sample") as bar:
            while not all(b.done for b in blocks):
                n_samples, start, before = rounds.steps, time.perf_counter(), sum(b.next for b in blocks)
                runner.map(lambda b: b.run(self, S, t_max, tol, max_events, run, n_samples),
                           [b for b in blocks if not b.done])
                rounds.update(n_samples, time.perf_counter() - start)
                bar.update(sum(b.next for b in blocks) - before)
        run.collect(blocks)
        return run

    def representation(self, state, sample, active, sliding):
        """``(star, Yt, mu, gamma, bound)`` of the segment of ``sample`` starting at ``state`` in that region."""
        status, star, Yt, mu, gamma, bound = segment_representation(
            np.ascontiguousarray(state, dtype=np.float64), self.E[sample], self.alpha,
            np.ascontiguousarray(active, dtype=np.bool_), np.ascontiguousarray(sliding, dtype=np.bool_),
            self.op, self.kmax)
        if status != OK:      # cannot happen for a segment the engine wrote (same code, same inputs)
            raise RuntimeError("the Krylov representation of a stored segment did not reach its grade")
        return star, Yt, mu, gamma, bound


class _Block:
    """Buffers of the samples ``lo <= s < hi``."""

    def __init__(self, lo, hi, n, n_units, per_sample):
        self.lo, self.hi = lo, hi
        self.counters = np.zeros(N_COUNTERS, dtype=np.int64)
        self.counters[C_NEXT] = lo
        self.seg = self._segment_buffers(per_sample * (hi - lo), n, n_units)
        self.ev = self._event_buffers(per_sample * (hi - lo))

    @staticmethod
    def _segment_buffers(cap, n, n_units):
        return SegmentRecords(np.zeros(cap, np.int64), np.zeros(cap), np.zeros(cap), np.zeros((cap, n)),
                              np.zeros((cap, n_units), np.bool_), np.zeros((cap, n_units), np.bool_),
                              np.zeros(cap, np.int64), np.zeros(cap))

    @staticmethod
    def _event_buffers(cap):
        return EventRecords(np.zeros(cap), np.zeros(cap, np.int64), np.zeros(cap, np.int64),
                            np.zeros(cap, np.int64), np.zeros(cap, np.bool_))

    @staticmethod
    def _grown(buffers, used):
        out = []
        for b in buffers:
            new = np.zeros((2 * b.shape[0],) + b.shape[1:], dtype=b.dtype)
            new[:used] = b[:used]
            out.append(new)
        return type(buffers)(*out)

    @property
    def next(self):
        """The next sample to integrate."""
        return int(self.counters[C_NEXT])

    @property
    def done(self):
        return self.counters[C_NEXT] >= self.hi

    def run(self, engine, S, t_max, tol, max_events, run, samples):
        """Integrate the next ``samples`` samples of the block (fewer at its end)."""
        stop = min(self.hi, int(self.counters[C_NEXT]) + samples)
        while True:
            exact_run(stop, S, engine.E, engine.P0, engine.op, engine.alpha, t_max, tol, max_events,
                      engine.kmax, self.seg, self.ev, run.results, self.counters)
            if self.counters[C_STATUS] == OK:
                return
            # FULL: grow both (cheap) and resume at the interrupted sample
            self.seg = self._grown(self.seg, int(self.counters[C_NSEG]))
            self.ev = self._grown(self.ev, int(self.counters[C_NEV]))


class KrylovRun:
    """What the engine computed for a batch: per-sample results and the concatenated records."""

    def __init__(self, M, n):
        self.results = SampleResults(np.zeros(M), np.zeros(M, dtype=np.bool_), np.zeros((M, n)), np.zeros((M, n)),
                                     np.zeros(M, dtype=np.bool_))
        self.time, self.converged, self.final, self.star, self.fallback = self.results

    def collect(self, blocks):
        names_seg = ("seg_sample", "seg_start", "seg_end", "seg_state", "seg_active", "seg_sliding", "seg_k",
                     "seg_bound")
        names_ev = ("ev_time", "ev_sample", "ev_unit", "ev_kind", "ev_active")
        for names, attr, counter in ((names_seg, "seg", C_NSEG), (names_ev, "ev", C_NEV)):
            for i, name in enumerate(names):
                setattr(self, name, np.concatenate([getattr(b, attr)[i][:int(b.counters[counter])] for b in blocks]))


class KrylovSegment:
    """A segment of the compiled engine: ``[start, end]`` in one region, from its stored start state.

    Attributes ``sample, start, end, active, sliding`` as every segment; ``k`` the Krylov
    dimension and ``krylov_bound`` the a-posteriori bound on its states' Krylov error.
    """

    __slots__ = ("sample", "start", "end", "active", "sliding", "k", "krylov_bound", "_state0", "_engine")

    def __init__(self, engine, sample, start, end, state0, active, sliding, k, bound):
        self._engine, self.sample, self.start, self.end = engine, int(sample), float(start), float(end)
        self._state0, self.active, self.sliding, self.k, self.krylov_bound = state0, active, sliding, int(k), \
            float(bound)

    def __repr__(self):
        return (f"KrylovSegment(sample={self.sample}, start={self.start:.6g}, end={self.end:.6g}, "
                f"active={int(self.active.sum())}, sliding={int(self.sliding.sum())}, k={self.k})")

    def states(self, t):
        """Full states at times ``t`` (1-D array), shape (n_t, n)."""
        star, Yt, mu, gamma, _ = self._engine.representation(self._state0, self.sample, self.active, self.sliding)
        E = np.exp(-np.outer(np.asarray(t, dtype=np.float64) - self.start, mu))
        return star[None, :] + (E * gamma) @ Yt


class SegmentList(Sequence):
    """All segments of a run, sample-major, made on demand.

    ``samples``, ``starts``, ``ends``, ``active``, ``sliding`` (arrays) describe them without
    making them; compiled
    segments come from the engine's records, the others (samples integrated by the Python
    path) are kept as objects.
    """

    def __init__(self, engine, run, others):
        """``others``: {sample: list of segments} for the samples the engine handed back."""
        M = run.time.size
        first = np.searchsorted(run.seg_sample, np.arange(M + 1))    # records are sample-major
        self._engine, self._run, self._others = engine, run, []
        src, samples, starts, ends, active, sliding = [], [], [], [], [], []
        for s in range(M):
            if s in others:
                segs = others[s]
                src.append(-1 - (len(self._others) + np.arange(len(segs))))
                self._others += segs
                samples.append(np.full(len(segs), s))
                starts.append(np.array([g.start for g in segs]))
                ends.append(np.array([g.end for g in segs]))
                active.append(np.array([g.active for g in segs]).reshape(len(segs), -1))
                sliding.append(np.array([g.sliding for g in segs]).reshape(len(segs), -1))
            else:
                a, b = first[s], first[s + 1]
                src.append(np.arange(a, b))
                for out, arr in ((samples, run.seg_sample), (starts, run.seg_start), (ends, run.seg_end),
                                 (active, run.seg_active), (sliding, run.seg_sliding)):
                    out.append(arr[a:b])
        cat = (lambda parts, like: np.concatenate(parts) if parts else like[:0])
        self._src = cat(src, np.zeros(0, np.int64)).astype(np.int64)
        self.samples, self.starts, self.ends = cat(samples, run.seg_sample), cat(starts, run.seg_start), \
            cat(ends, run.seg_end)
        self.active, self.sliding = cat(active, run.seg_active), cat(sliding, run.seg_sliding)

    def __len__(self):
        return int(self._src.size)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        src = int(self._src[i])
        if src < 0:
            return self._others[-1 - src]
        r = self._run
        return KrylovSegment(self._engine, r.seg_sample[src], r.seg_start[src], r.seg_end[src], r.seg_state[src],
                             r.seg_active[src], r.seg_sliding[src], r.seg_k[src], r.seg_bound[src])

    def start_state(self, i):
        """State at the start of segment ``i`` (stored for compiled segments)."""
        src = int(self._src[i])
        if src >= 0:
            return self._run.seg_state[src]
        seg = self._others[-1 - src]
        return seg.states(np.array([seg.start]))[0]

    def compiled(self):
        """Positions of the compiled segments (the others came from the Python path)."""
        return np.flatnonzero(self._src >= 0)

    def krylov_bounds(self):
        """A-posteriori Krylov error bound of every compiled segment (in :meth:`compiled` order)."""
        return self._run.seg_bound[self._src[self._src >= 0]]
