"""One Euler training run from validated data to its result: chain or graph, fresh or resumed."""

from ..checkpoint import TrainingCheckpoint, check_checkpoint_path
from ..epochs import epoch_loop
from . import stagnation as _stagnation
from .chain import ChainJointRun, EulerSettings
from .graph import GraphJointRun


def run_euler(prob, settings, checkpoint, callback, progress):
    """Train by the paper's joint dynamics (forward Euler) and return the :class:`TrainResult`.

    Parameters
    ----------
    prob : Problem
        The validated network, data and loss.
    settings : dict
        The keywords of :meth:`EulerSettings.check` (the Euler options of :func:`~sheaflinalg.train`).
    checkpoint, callback, progress
        As for :func:`~sheaflinalg.train`.
    """
    cfg = EulerSettings.check(prob, callback=callback, **settings)
    if checkpoint is not None:
        check_checkpoint_path(checkpoint)
    run = GraphJointRun(prob, cfg) if prob.net.is_graph else ChainJointRun(prob, cfg)
    return run_to_end(run, checkpoint, callback, progress)


def run_to_end(run, checkpoint, callback, progress):
    """A joint-dynamics run (fresh or resumed from ``checkpoint``) through its epochs; returns its result."""
    ckpt = None if checkpoint is None else TrainingCheckpoint(checkpoint, run.fingerprint())
    resumed = ckpt.load(run.expected()) if ckpt is not None else None
    first_epoch = run.resume(resumed) if resumed is not None else run.begin()
    epoch_loop(run, first_epoch, ckpt, callback, progress)
    _stagnation.finish(run.history.stagnation, run.history.weight_displacement)
    return run.result()
