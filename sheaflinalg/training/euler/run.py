"""One Euler training run from validated data to its result: chain or graph, fresh or resumed."""

from ..epochs import train_epochs
from . import stagnation as _stagnation
from .chain import ChainJointRun, EulerSettings
from .graph import GraphJointRun
from ...network.paths import GRAPH, engine


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
    family = GraphJointRun if engine(prob.net) == GRAPH else ChainJointRun
    run = train_epochs(lambda: family(prob, cfg), checkpoint, callback, progress)
    _stagnation.finish(run.history.stagnation, run.history.weight_displacement)
    return run.result()
