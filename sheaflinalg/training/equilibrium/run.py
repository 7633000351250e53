"""Quasi-static training: per mini-batch, the oracle's exact equilibrium gradient, then an optimiser step.

:class:`EquilibriumRun` shares the epoch loop of the joint dynamics
(:func:`~sheaflinalg.training.epochs.epoch_loop`: records, progress bar,
callbacks, checkpoints, divergence).  An epoch draws its mini-batches from the
run's generator (:mod:`~sheaflinalg.training.batches`); for each, the oracle
(:class:`~.oracle.EquilibriumOracle`) returns the gradient estimate at the
batch's equilibria (the average of ``+b`` and ``-b`` with symmetric nudging)
and the optimiser moves the weights at the schedule's rate.  The checkpoint
holds the weights, the optimiser's state, the generator and the history, so a
resumed run continues bit for bit.
"""

import dataclasses
import warnings

import numpy as np

from ...network.model import NetworkOverflowError
from ..batches import epoch_batches
from ..checkpoint import RunShape, network_identity
from ..epochs import EpochRun, train_epochs
from ..velocity import GraphParameters
from ..history import History, Recorder, TrainingInfo
from ..problem import TrainResult
from .chain import ChainEquilibrium
from .graph import TIES_NUDGING, GraphEquilibrium
from .loss_edge import NudgingTooNegative
from .oracle import SettleReport
from .settings import EquilibriumSettings, lr_of


class UnsettledWarning(RuntimeWarning):
    """The activation pattern of some samples' equilibria did not settle: it cycled (a kink the search does not
    resolve, such as a max-pool tie at a nudging above ``TIES_NUDGING``) or ran out of ``max_pattern_iterations``.
    Ties of the forward pass at ``|b| <= TIES_NUDGING`` (equal max-pool entries, pre-activations at exactly 0)
    are decided by the sign of the response and never reported."""


def make_oracle(prob, cfg):
    """The exact equilibrium of the network's family (:class:`~.oracle.EquilibriumOracle`)."""
    net = prob.net
    chain = net.chain
    if chain is None:
        return GraphEquilibrium(net.graph, prob.loss, cfg.max_pattern_iterations, cfg.symmetric)
    return ChainEquilibrium(net.dims, net.output, prob.loss, None, cfg.max_pattern_iterations, chain.names,
                            cfg.symmetric)


class EquilibriumRun(EpochRun):
    """One quasi-static run: weights ``theta``, the optimiser's state, the batch generator, the history."""

    def __init__(self, prob, cfg, oracle):
        net = prob.net
        self.prob, self.cfg, self.net, self.oracle = prob, cfg, net, oracle
        self.params = GraphParameters(net.graph) if net.is_graph else None
        self.theta = self.params.flat() if net.is_graph else net.parameters()
        self.grad, self.grad_minus = np.empty_like(self.theta), np.empty_like(self.theta)
        self.opt_state = cfg.optimizer.init_state(self.theta.size)
        self.rng = np.random.default_rng(cfg.seed)
        self.rng_start = self.rng.bit_generator.state     # the run's identity when seeded by a Generator
        self.history = History(method="equilibrium", loss=prob.loss)
        self.rec = Recorder(self.history, net, prob.X, prob.Y, prob.X_test, prob.Y_test, prob.loss, prob.loss_param,
                            self.theta, params=self.params)
        self.step = 0
        self.layout = None
        self.warned = False

    # ---------------------------------------------------------------- one epoch
    def gradient(self, X, Y):
        """The oracle's gradient at the batch's equilibria into ``self.grad`` (symmetric: mean of +b and -b)."""
        b = self.cfg.nudging
        report = self.oracle.gradient(self.theta, X, Y, b, self.grad)
        if not self.cfg.symmetric:
            return report
        try:
            other = self.oracle.gradient(self.theta, X, Y, -b, self.grad_minus)
        except NudgingTooNegative as exc:
            raise NudgingTooNegative(f"symmetric nudging after {self.step} optimiser steps: {exc}") from None
        self.grad += self.grad_minus
        self.grad *= 0.5
        return SettleReport(max(report.iterations, other.iterations), report.unsettled + other.unsettled,
                            report.sliding + other.sliding, 0.5 * (report.energy + other.energy),
                            report.decided + other.decided)

    def run_epoch(self, epoch):
        """One epoch of mini-batches, recorded when due; False (weights rolled back) at the first non-finite
        gradient, weight or loss."""
        cfg, prob = self.cfg, self.prob
        theta_prev = self.theta.copy()
        state_prev = {k: v.copy() for k, v in self.opt_state.items()}
        settle = [0, 0, 0, 0]
        finite = True
        for k, rows in enumerate(epoch_batches(prob.X.shape[0], cfg.batch_size, self.rng)):
            finite = self.batch_step(prob.X[rows], prob.Y[rows], settle, epoch, k)
            if not finite:
                break
        if finite and (epoch % cfg.record_every == 0 or epoch == cfg.n_epochs):
            finite = self.record(epoch, settle)
        if not finite:
            self.theta[:] = theta_prev
            self.opt_state = state_prev
        return finite

    def batch_step(self, X, Y, settle, epoch, k):
        """Gradient and optimiser step of one mini-batch; False if the gradient or the weights are not finite."""
        cfg = self.cfg
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                report = self.gradient(X, Y)
        except NetworkOverflowError:         # weights grown past float64: reported as divergence
            return False
        settle[0] = max(settle[0], int(report.iterations))
        settle[1] += int(report.unsettled)
        settle[2] += int(report.sliding)
        settle[3] += int(report.decided)
        if report.unsettled and not self.warned:
            self.warned = True
            n = X.shape[0] * (2 if cfg.symmetric else 1)      # symmetric nudging: two equilibria per sample
            warnings.warn(f"{report.unsettled} of the {n} equilibria of mini-batch {k + 1} of epoch {epoch} "
                          f"did not settle: their activation patterns cycled or ran out of max_pattern_iterations="
                          f"{cfg.max_pattern_iterations}; their last iterate is used (history.unsettled counts "
                          f"them per epoch). Ties of the forward pass (equal max-pool window entries, pre-activations at "
                          f"exactly 0) are decided at nudgings |b| <= {TIES_NUDGING:g} only", UnsettledWarning,
                          stacklevel=2)
        if not np.all(np.isfinite(self.grad)):
            return False
        with np.errstate(over="ignore", invalid="ignore"):
            cfg.optimizer.update(self.theta, self.grad, self.opt_state, self.step + 1, lr_of(cfg, self.step))
        self.step += 1
        return bool(np.all(np.isfinite(self.theta)))

    # ---------------------------------------------------------------- records
    def record(self, epoch, settle=(None,) * 4):
        """Append one history record; False (and the record dropped) if the loss is not finite."""
        train_loss = self.rec.record(epoch, self.step, self.theta, settle=tuple(settle))
        if np.isfinite(train_loss):
            return True
        self.history.drop_last()
        return False

    def begin(self):
        """Record the initial weights; returns the first epoch (1)."""
        self.rec.record(0, 0, self.theta)
        return 1

    def info(self, epoch):
        """The callback's :class:`TrainingInfo` after ``epoch`` (no state: equilibria are per batch)."""
        return TrainingInfo("equilibrium", epoch, self.step, self.rec.network(self.theta), self.prob.X, None,
                            self.history)

    def result(self):
        return TrainResult(self.rec.network(self.theta), self.history)

    # ---------------------------------------------------------------- checkpoints
    def identity(self):
        """The network's part of the checkpoint's fingerprint."""
        return dict(network_identity(self.net), loss_param=self.prob.loss_param)

    def expected(self):
        """What a checkpoint of this run must hold (:class:`~sheaflinalg.training.checkpoint.RunShape`)."""
        cfg = self.cfg
        arrays = dict({"theta": self.theta.shape}, **{_slot(s): self.theta.shape for s in self.opt_state})
        n_trained = len({name for name, *_ in self.params.slices}) if self.params else len(self.net.weights)
        return RunShape(arrays, None, cfg.steps, cfg.epoch_steps, cfg.record_every, self.rng, self.history,
                        n_trained, None, None)

    def restore(self, saved):
        """The optimiser's state from a checkpoint's arrays."""
        self.opt_state = {s: np.array(saved[_slot(s)]) for s in self.opt_state}

    def save(self, ckpt, epoch):
        arrays = dict({"theta": self.theta}, **{_slot(s): v for s, v in self.opt_state.items()})
        ckpt.save(arrays, {"epoch": epoch, "step": self.step, "rng": self.rng.bit_generator.state,
                           "history": dataclasses.asdict(self.history)})


def _slot(name):
    """A checkpoint entry of the optimiser's state."""
    return f"optimizer_{name}"


def run_equilibrium(prob, settings, checkpoint, callback, progress):
    """Train by exact equilibria per mini-batch and return the :class:`TrainResult`.

    Parameters
    ----------
    prob : Problem
        The validated network, data and loss.
    settings : dict
        The keywords of :meth:`EquilibriumSettings.check` (the options of ``train(method="equilibrium")``).
    checkpoint, callback, progress
        As for :func:`~sheaflinalg.train`.
    """
    cfg = EquilibriumSettings.check(prob, callback=callback, **settings)
    return train_epochs(lambda: EquilibriumRun(prob, cfg, make_oracle(prob, cfg)), checkpoint, callback,
                        progress).result()
