"""The trained networks the diagnostics look at: ``[2,30,1]`` on the paraboloid (the paper's own
Table E.1 inputs, sheaf and SGD) and ``[2,12,8,6,1]`` (sheaf), with snapshots at three training
stages and spectral tracking along the way.

Stages are 1k, 20k and 100k steps (``shared/reference-protocols.md``); the quick mode uses 200, 1k
and 3k.  Results are kept in memory for the other items of the same process.
"""

import functools

import numpy as np

from .. import tasks
from ..network.model import Network
from ..spectral.tracker import SpectralTracker
from ..training.train import train

STAGES = {False: (1_000, 20_000, 100_000), True: (200, 1_000, 3_000)}
TRACK_INPUTS = 50


class _Snapshots:
    """Training callback: spectral tracking and the networks at the stage steps."""

    def __init__(self, stages, X):
        self.stages = set(stages)
        self.networks = {}
        self.tracker = SpectralTracker(X)

    def __call__(self, info):
        self.tracker(info)
        if info.step in self.stages:
            self.networks[info.step] = info.network


@functools.lru_cache(maxsize=2)
def paraboloid_runs(quick):
    """``{method: (snapshots, history, final network)}`` for ``[2,30,1]`` on the paper's paraboloid inputs."""
    exp = tasks.table_e1("paraboloid_1H")
    stages = STAGES[quick]
    every = stages[0]
    runs = {}
    for method in ("sheaf", "sgd"):
        snap = _Snapshots(stages, exp.X_train[:TRACK_INPUTS])
        kwargs = dict(callback=snap, callback_every=every)
        if method == "sheaf":
            kwargs["epoch_steps"] = min(1000, every)
        else:
            kwargs["record_every"] = every
        fit = exp.fit(steps=stages[-1], method=method, **kwargs)
        runs[method] = (snap, fit.history, fit.network)
    return exp, runs


@functools.lru_cache(maxsize=2)
def deep_sheaf_network(quick):
    """A sheaf-trained ``[2,12,8,6,1]`` on paraboloid data (seed 0) and its test inputs and labels."""
    data = tasks.make("paraboloid", 300, 100, seed=0)
    net = Network.random([2, 12, 8, 6, 1], seed=0)
    fit = train(net, data.X_train, data.Y_train, steps=STAGES[quick][-1], seed=0, progress=False)
    return fit.network, data.X_test, data.Y_test


def random_inputs(n=100, seed=0):
    """``n`` inputs uniform on ``[-2, 2]^2``."""
    return np.random.default_rng(seed).uniform(-2, 2, size=(n, 2))
