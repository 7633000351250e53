"""Steps of the joint dynamics on a batch cut into tiles, on numba's threads when that is faster.

Every Euler step of training couples all samples through the weights: each
tile of samples (:func:`~sheaflinalg.kernels.training.train_tiles`, cut by
the batch size alone) computes its new stalks and its share of the weight
velocity, and the shares are added in tile order before the weights move.
The tiles run serially or in one parallel region per step
(:data:`~sheaflinalg.kernels.training.tiled_steps_parallel`); both give the
same result bit for bit, so threads only change the time.

A step of a few hundred microseconds cannot hide a barrier that waits for a
descheduled thread (a time slice, milliseconds): on a busy machine the
parallel path collapses.  So a :class:`~sheaflinalg._common.threads.SerialOrParallel`
chooser, shared by the runs of one network shape, batch size and thread
count, times both paths and runs the faster, and every parallel stretch
starts short (:data:`FIRST_PARALLEL_STEPS`) and doubles only while the
parallel path keeps being chosen: a probe of the parallel path on a loaded
machine costs a few steps, not a round.
"""

import time

import numba
import numpy as np

from .._common import threads as _threads
from ..kernels.training import tiled_steps, tiled_steps_parallel, train_tiles

# A parallel stretch starts with this many steps and doubles, up to about
# PARALLEL_SECONDS of work at the parallel path's speed (a load that arrives
# mid-stretch makes it wait a time slice per step, so the stretch is kept short).
FIRST_PARALLEL_STEPS = 8
PARALLEL_SECONDS = 0.02


class TiledSteps:
    """The kernel of one training run on ``M`` samples: ``steps(before, n, after)`` runs ``n`` steps.

    ``before`` and ``after`` are the arguments of
    :func:`~sheaflinalg.kernels.training.train_steps` before and after
    ``n_steps`` (up to ``grad``); the tiles and their partial sums are kept here.

    Examples
    --------
    >>> import numpy as np
    >>> steps = TiledSteps(np.array([2, 30, 1]), 62, 1000, 121, threads=2)
    >>> steps.n_tiles, steps.parallel
    (3, True)
    >>> TiledSteps(np.array([2, 30, 1]), 62, 300, 121, threads=8).parallel   # one tile
    False
    """

    def __init__(self, dims, n_rows, M, n_params, threads):
        self.bounds, self.widths, self.blas = train_tiles(dims, n_rows, M)
        self.n_tiles = len(self.bounds) - 1
        self.partials = np.empty((self.n_tiles, n_params))
        self.threads = threads
        self.parallel = self.n_tiles > 1 and threads > 1
        self.choice = (_threads.serial_or_parallel(("train", tuple(int(d) for d in dims), M, threads))
                       if self.parallel else None)
        self.parallel_steps = FIRST_PARALLEL_STEPS

    def _run(self, kernel, before, n, after):
        return kernel(*before, n, *after, self.bounds, self.widths, self.partials, self.blas)

    def __call__(self, before, n, after):
        """Run ``n`` steps: ``before`` are the kernel's arguments before ``n_steps``, ``after`` those
        after it up to ``grad``.  Returns the steps done (fewer when the run stopped being finite)."""
        if not (self.parallel and _threads.parallel_allowed()):
            return self._run(tiled_steps, before, n, after)
        done = 0
        while done < n:
            parallel = self.choice.choose()
            # The serial path runs the rest of the round when it is the one preferred; a probe of it while
            # the parallel path is preferred, and every parallel stretch, runs a stretch.
            settled = not parallel and not self.choice.prefers_parallel()
            k = n - done if settled else min(n - done, self.parallel_steps)
            start = time.perf_counter()
            if parallel:
                with _threads.PARALLEL_LOCK:
                    numba.set_num_threads(_threads.numba_threads(self.threads))
                    d = self._run(tiled_steps_parallel, before, k, after)
            else:
                d = self._run(tiled_steps, before, k, after)
            per_step = (time.perf_counter() - start) / max(d, 1)
            if d > 0:
                self.choice.record(parallel, per_step)
            if parallel:
                self._next_stretch(per_step)
            done += d
            if d < k:
                break
        return done

    def _next_stretch(self, per_step):
        """Longer parallel stretches while the parallel path is preferred, short probes otherwise."""
        if self.choice.prefers_parallel():
            cap = max(FIRST_PARALLEL_STEPS, int(PARALLEL_SECONDS / max(per_step, 1e-9)))
            self.parallel_steps = min(2 * self.parallel_steps, cap)
        else:
            self.parallel_steps = FIRST_PARALLEL_STEPS
