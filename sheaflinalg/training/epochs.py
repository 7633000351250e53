"""The epoch loop of the joint dynamics, shared by chains and graph networks.

A run (:class:`~sheaflinalg.training.euler.chain.ChainJointRun` or
:class:`~sheaflinalg.training.euler.graph.GraphJointRun`) offers
``run_epoch(epoch) -> finite``, ``info(epoch)`` (the callback's
:class:`~sheaflinalg.training.history.TrainingInfo`), ``save(ckpt, epoch)``,
``cfg``, ``step`` and ``history``.
"""

import numpy as np

from .._common.progress import progress_bar
from .._common.threads import blas_limit

from .._common.threads import check_blas_threads
from .._common.validation import check_int, check_seed
from .checkpoint import TrainingCheckpoint, check_checkpoint_path, fingerprint
from .history import TrainingInfo, stop_diverged
from .problem import TrainResult


class EpochRun:
    """What the chain's and the graph's joint-dynamics runs share: records, the callback's info, the result.

    A subclass has ``prob``, ``cfg`` (with ``identity()`` and ``identity_arrays()``: its settings and
    arrays in the checkpoint's fingerprint), ``theta``, ``step``, ``history``, ``rng``,
    ``rng_start``, ``rec`` (a :class:`~sheaflinalg.training.history.Recorder`),
    ``layout``, ``diagnose()``, ``rows()`` (the free cochain ``(n_samples,
    n_free)``), ``identity()`` (the network's settings in the checkpoint's
    fingerprint) and ``restore(saved)`` (the state from a checkpoint's arrays).
    """

    def fingerprint(self):
        """Identity of this run for its checkpoint: the data, the initial weights and every setting."""
        cfg, prob = self.cfg, self.prob
        settings = dict(self.identity(), **cfg.identity(), loss=prob.loss, record_every=cfg.record_every,
                        seed=None if cfg.seed is None else self.rng_start)
        arrays = [prob.X, prob.Y, self.theta] + cfg.identity_arrays()
        arrays += [] if prob.X_test is None else [prob.X_test, prob.Y_test]
        return fingerprint(arrays, settings)

    def resume(self, resumed):
        """Continue from a checkpoint's ``(arrays, meta)`` checked by :meth:`TrainingCheckpoint.load` against
        the run's ``expected()``; returns the first epoch still to run."""
        saved, meta = resumed
        self.theta[:] = saved["theta"]
        self.restore(saved)
        self.history = self.rec.history = meta["history"]
        self.rng.bit_generator.state = meta["rng"]
        self.step = meta["step"]
        self.rec.t0 -= self.history.wall_time[-1]
        return meta["epoch"] + 1

    def record(self, epoch):
        """Append one history record; False (and the record dropped) if the loss or discord is not finite."""
        total, per_edge, _, state_norm = self.diagnose()
        train_loss = self.rec.record(epoch, self.step, self.theta, total, per_edge, state_norm)
        stag = self.history.stagnation
        stag["B_omega"] = max(stag["B_omega"], state_norm)
        if np.isfinite(train_loss) and np.isfinite(total):
            return True
        self.history.drop_last()
        return False

    def info(self, epoch):
        """The callback's :class:`TrainingInfo` after ``epoch``."""
        return TrainingInfo("sheaf", epoch, self.step, self.rec.network(self.theta), self.prob.X, self.rows(),
                            self.history, self.layout)

    def result(self):
        return TrainResult(self.rec.network(self.theta), self.history, self.rows(), self.layout)


def epoch_loop(run, first_epoch, ckpt, callback, progress):
    """Epochs ``first_epoch .. n_epochs`` with progress bar, callbacks and checkpoints; stops on divergence."""
    cfg = run.cfg
    with blas_limit(cfg.blas_threads), progress_bar(cfg.n_epochs, progress, "sheaf training", unit="epoch") as bar:
        bar.update(first_epoch - 1)
        for epoch in range(first_epoch, cfg.n_epochs + 1):
            if not run.run_epoch(epoch):
                stop_diverged(run.history, epoch, run.step)
                break
            bar.update(1)
            bar.set_postfix(loss=f"{run.history.train_loss[-1]:.4g}", refresh=False)
            if callback is not None and run.step % cfg.callback_every == 0:
                callback(run.info(epoch))
            if ckpt is not None and (epoch % cfg.checkpoint_every == 0 or epoch == cfg.n_epochs):
                run.save(ckpt, epoch)


def check_loop_settings(epoch_steps, *, record_every, seed, callback, callback_every, blas_threads, checkpoint_every):
    """The settings of the epoch loop every method shares, checked before any work; returns
    ``(record_every, callback_every, checkpoint_every)`` (``callback_every=None``: one epoch of steps)."""
    record_every = check_int(record_every, "record_every")
    callback_every = epoch_steps if callback_every is None else check_int(callback_every, "callback_every")
    if callback is not None and not callable(callback):
        raise TypeError("callback must be callable")
    check_blas_threads(blas_threads)
    checkpoint_every = check_int(checkpoint_every, "checkpoint_every")
    check_seed(seed)
    return record_every, callback_every, checkpoint_every


def train_epochs(make_run, checkpoint, callback, progress):
    """Check the checkpoint's file name, build the run (``make_run()``), resume it from its checkpoint or begin
    it, and run :func:`epoch_loop`; returns the run."""
    if checkpoint is not None:
        check_checkpoint_path(checkpoint)
    run = make_run()
    ckpt = None if checkpoint is None else TrainingCheckpoint(checkpoint, run.fingerprint())
    resumed = ckpt.load(run.expected()) if ckpt is not None else None
    first_epoch = run.resume(resumed) if resumed is not None else run.begin()
    epoch_loop(run, first_epoch, ckpt, callback, progress)
    return run
