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
count, times both paths and runs the faster (with no more threads than the
cores other runnable tasks leave free, :func:`~sheaflinalg._common.threads.usable_threads`), and every parallel stretch
starts short (:data:`FIRST_PARALLEL_STEPS`) and doubles only while the
parallel path keeps being chosen: a probe of the parallel path on a loaded
machine costs a few steps, not a round.
"""

import contextlib
import time

import numba
import numpy as np

from ..._common import threads as _threads
from ...kernels.structs import Scratch, Tiles
from ...kernels.training import pack_tiles, tiled_steps, tiled_steps_parallel, train_tiles, unpack_tiles

# A parallel stretch starts with this many steps and doubles, up to about
# PARALLEL_SECONDS of work at the parallel path's speed (a load that arrives
# mid-stretch makes it wait a time slice per step, so the stretch is kept short).
FIRST_PARALLEL_STEPS = 8
PARALLEL_SECONDS = 0.02


class TiledSteps:
    """The kernel of one training run on the inputs ``X`` (``(n_0, M)``, samples as columns).

    Inside ``with steps.packed(S, S_anchor):`` the stalks live in the tiles'
    order (written back to ``S`` at the end; one tile: ``S`` itself), and
    ``steps(n, ...)`` runs ``n`` steps on them (see :meth:`__call__`).
    ``blas_threads`` is the BLAS setting of the run: tiles that call BLAS
    share the threads only with one BLAS thread (a threaded BLAS inside the
    parallel region would run with other thread counts than serially).

    Examples
    --------
    >>> import numpy as np
    >>> steps = TiledSteps(np.zeros((2, 5000)), np.array([2, 30, 1]), 62, 121, threads=2, blas_threads=1)
    >>> steps.n_tiles, steps.parallel
    (2, True)
    >>> TiledSteps(np.zeros((2, 300)), np.array([2, 30, 1]), 62, 121, threads=8, blas_threads=1).parallel
    False
    """

    def __init__(self, X, dims, n_rows, n_params, threads, blas_threads):
        M = X.shape[1]
        self.bounds, self.widths, blas = train_tiles(dims, n_rows, M)
        self.n_tiles = len(self.bounds) - 1
        self.partials = np.empty((self.n_tiles, n_params))
        self.tiles = Tiles(self.bounds, self.widths, self.partials)
        self.X = self._tile_major(X)
        self.threads = threads
        self.parallel = self.n_tiles > 1 and threads > 1 and (blas_threads == 1 or not blas)
        self.choice = (_threads.serial_or_parallel(("train", tuple(int(d) for d in dims), M, threads))
                       if self.parallel else None)
        self.parallel_steps = FIRST_PARALLEL_STEPS
        self._S = self._S_anchor = None

    def _tile_major(self, A):
        if self.n_tiles == 1:
            return A.reshape(-1)
        flat = np.empty(A.size)
        pack_tiles(A, self.bounds, flat)
        return flat

    @contextlib.contextmanager
    def packed(self, S, S_anchor):
        """The stalks ``S`` (and the state anchor, when it has their shape) in tile order for the steps
        run inside the block; ``S`` holds the result when the block ends (also by an exception)."""
        if not (S.flags.c_contiguous and S_anchor.flags.c_contiguous):
            raise ValueError("the stalks and their anchor must be C-contiguous")   # views, not copies, below
        self._S = self._tile_major(S)
        self._S_anchor = self._tile_major(S_anchor) if S_anchor.shape == S.shape else S_anchor.reshape(-1)
        try:
            yield
        finally:
            if self.n_tiles > 1:
                unpack_tiles(self._S, self.bounds, S)
            self._S = self._S_anchor = None

    def _run(self, kernel, n, theta, lay, edge, rates, n_move, state_reg, weight_reg, scratch, grad):
        flat = Scratch(*(a.reshape(-1) for a in scratch))
        return kernel(self.X, self._S, theta, lay, edge, rates, n, n_move, state_reg._replace(anchor=self._S_anchor),
                      weight_reg, flat, grad, self.tiles)

    def __call__(self, n, *args):
        """Run ``n`` steps inside :meth:`packed`.  ``args``: ``theta, lay, edge, rates, n_move, state_reg,
        weight_reg, scratch, grad`` as :func:`~sheaflinalg.kernels.training.train_steps` takes them, the
        stalks' anchor (of ``state_reg``) being the one given to :meth:`packed`.  Returns the steps done
        (fewer when the run stopped being finite)."""
        if not (self.parallel and _threads.parallel_allowed()):
            return self._run(tiled_steps, n, *args)
        done = 0
        while done < n:
            threads = _threads.usable_threads(self.threads)     # other work takes cores: fewer threads
            parallel = threads > 1 and self.choice.choose()
            # The serial path runs the rest of the round when it is the one preferred (or the only one
            # the machine's load leaves); a probe of it while the parallel path is preferred, and every
            # parallel stretch, runs a stretch.
            settled = not parallel and (threads == 1 or not self.choice.prefers_parallel())
            k = n - done if settled else min(n - done, self.parallel_steps)
            start = time.perf_counter()
            if parallel:
                with _threads.PARALLEL_LOCK:
                    numba.set_num_threads(_threads.numba_threads(threads))
                    d = self._run(tiled_steps_parallel, k, *args)
                _threads.parallel_done(threads)
            else:
                d = self._run(tiled_steps, k, *args)
            per_step = (time.perf_counter() - start) / max(d, 1)
            if d > 0 and threads > 1:
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
