"""One IMEX training run of a chain: settings, the run (the Euler run's state, stepped by ROS2) and its result.

The run integrates the same joint dynamics as ``method="euler"`` over the same
model time (``steps * dt``, epochs of ``epoch_steps * dt``, recorded at the
same times with the same ``step`` counters), by the adaptive steps of
:class:`~sheaflinalg.training.imex.ros2.Ros2`; ``dt`` is only its first step.
"""

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..._common.validation import check_positive
from ..epochs import train_epochs
from ..euler import stagnation as _stagnation
from ..euler.chain import DEFAULTS as EULER_DEFAULTS
from ..euler.chain import ChainJointRun, EulerSettings
from ..problem import TrainResult
from .operator import ChainImplicitOperator
from .ros2 import COUNTERS, JointField, Ros2
from ...network.paths import require_chain

#: The options of ``train(method="imex")`` and their defaults: Euler's but ``reg`` and ``threads``, and ``tol``.
DEFAULTS = dict({k: v for k, v in EULER_DEFAULTS.items() if k not in ("reg", "threads")}, tol=1e-4)


@dataclass
class ImexSettings(EulerSettings):
    """:class:`EulerSettings` and the tolerance; ``dt`` is the first step, any positive value."""

    tol: float = 1e-4

    @staticmethod
    def check_stability(net, alpha, dt, X=None):
        """The implicit state step has no step-size limit of forward Euler's kind."""


@dataclass
class ImexResult(TrainResult):
    """:class:`TrainResult` with ``integration``: the counts of the adaptive integration.

    ``integration`` holds ``steps`` (accepted), ``rejected`` (by the error or a ReLU boundary),
    ``boundary_cuts``, ``force_evaluations``, ``factorisations`` and ``next_step`` (the step the
    integrator would try next).
    """

    integration: dict = None


class ImexChainRun(ChainJointRun):
    """A chain's joint-dynamics run (:class:`ChainJointRun`) whose epochs are integrated by ROS2."""

    def __init__(self, prob, cfg):
        super().__init__(prob, cfg)
        quadratic = prob.net.output == "identity" and prob.loss == "mse"
        op = ChainImplicitOperator(self.off, prob.X.shape[0], 1.0 if quadratic else 0.0)
        z_rows, a_rows = self._rows("z"), self._rows("a")
        self.ros2 = Ros2(JointField(self, z_rows, a_rows), op, cfg.tol, z_rows, a_rows, cfg.dt)

    def _rows(self, kind):
        """Rows of the hidden layers' ``z`` or ``a`` blocks."""
        blocks = [self.layout.free(f"{kind}{l}") for l in range(1, self.prob.net.n_hidden + 1)]
        return np.concatenate([np.arange(b.start, b.stop) for b in blocks] or [np.zeros(0, dtype=np.int64)])

    def advance(self, n):
        """``n * dt`` of model time; ``n`` (the Euler steps it stands for), or 0 when the integration failed."""
        return n if self.ros2.advance(self.S, self.theta, n * self.cfg.dt) else 0

    def identity(self):
        return dict(super().identity(), method="imex", tol=self.cfg.tol)

    def expected(self):
        shape = super().expected()
        return dataclasses.replace(shape, arrays=dict(shape.arrays, imex=(1 + len(COUNTERS),)))

    def restore(self, saved):
        super().restore(saved)
        self.ros2.restore(saved["imex"])

    def save(self, ckpt, epoch):
        ckpt.save({"theta": self.theta, "S": self.S, "imex": self.ros2.state()},
                  {"epoch": epoch, "step": self.step, "rng": self.rng.bit_generator.state,
                   "history": dataclasses.asdict(self.history)})

    def result(self):
        res = super().result()
        counts = dict(self.ros2.counts, next_step=self.ros2.h)
        return ImexResult(res.network, res.history, res.state, res.layout, integration=counts)


def run_imex(prob, settings, checkpoint, callback, progress):
    """Train a chain by the joint dynamics integrated by adaptive ROS2 steps; returns an :class:`ImexResult`.

    Parameters
    ----------
    prob : Problem
    settings : dict
        The keywords of :meth:`EulerSettings.check` but ``reg`` and ``threads`` (``dt``: the first
        step), and ``tol``, the tolerance of the error estimate (> 0).
    checkpoint, callback, progress
        As for :func:`~sheaflinalg.train`.
    """
    require_chain(prob.net, "train(method='imex')", "train graph networks with method='euler'")
    settings = dict(settings)
    tol = check_positive(settings.pop("tol"), "tol")
    cfg = ImexSettings.check(prob, callback=callback, reg=None, threads=1, **settings)
    cfg = dataclasses.replace(cfg, tol=tol)
    run = train_epochs(lambda: ImexChainRun(prob, cfg), checkpoint, callback, progress)
    _stagnation.finish(run.history.stagnation, run.history.weight_displacement)
    return run.result()
