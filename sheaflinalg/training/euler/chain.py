"""The joint dynamics of a chain network: settings, run state and compiled epochs (paper section 5.2).

The output vertex is pinned to the target, the input vertex to the data;
the free cochain and the weights evolve together by forward Euler, every
force taken from the old state and the old weights (see
:mod:`sheaflinalg.kernels.training`); the whole loop of an epoch runs in
compiled code on the shared force routine of the heat equation.

The settings are validated by :class:`EulerSettings` (chains and graph
networks); :class:`ChainJointRun` holds a chain's run (layout, buffers,
initial state, history) for :func:`~sheaflinalg.training.euler.run.run_euler`.
"""

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ..._common.rounds import Rounds
from ..._common.threads import resolve_threads
from ..._common.validation import as_float64, check_int, check_positive
from ...kernels.force import compute_forces
from ...kernels.potentials import (LOSS_CODES, OUTPUT_EDGE_ADJOINT, OUTPUT_EDGE_DISCREPANCY, PHI_CODES,
                                  discord_by_edge_block)
from ...kernels.structs import OutputEdge, Rates, Regularisation, Scratch
from ...network.model import NetworkOverflowError
from ...sheaf.layout import Layout
from ...sheaf.state import INITS, initial_state, to_columns, to_rows
from . import stagnation as _stagnation
from ..checkpoint import RunShape, network_identity
from ..epochs import EpochRun, check_loop_settings
from .graph import check_graph_settings, check_graph_step_size
from ..history import History, Recorder, Regularization
from .stagnation import effective_spectral_gap
from .tiled import TiledSteps
from ...network.paths import GRAPH, engine

KERNEL_LOSS = {"mse": LOSS_CODES["squared"], "l1": LOSS_CODES["l1"], "pnorm": LOSS_CODES["pnorm"],
               "huber": LOSS_CODES["huber"], "cross_entropy": LOSS_CODES["squared"]}


#: Options of ``train(method="euler")`` only, and their defaults.
DEFAULTS = dict(alpha=1.0, beta=None, dt=0.005, steps=100_000, init="random", warm_start=True, epoch_steps=1000,
                reg=None, stagnation="auto", threads=None)


@dataclass
class EulerSettings:
    """Validated settings of one :func:`train` call (names as in its signature)."""

    alpha: float
    beta: float
    dt: float
    steps: int
    init: object
    warm_start: bool
    epoch_steps: int
    reg: Regularization
    record_every: int
    seed: object
    callback_every: int
    stagnation: object
    blas_threads: object
    checkpoint_every: int
    threads: int

    @classmethod
    def check(cls, prob, *, alpha, beta, dt, steps, init, warm_start, epoch_steps, reg, record_every, seed,
              callback, callback_every, stagnation, blas_threads, checkpoint_every, threads):
        """Every setting checked before any work; errors name the parameter."""
        M = prob.X.shape[0]
        alpha = check_positive(alpha, "alpha")
        beta = 1.0 / M if beta is None else check_positive(beta, "beta")
        dt = check_positive(dt, "dt")
        steps = check_int(steps, "steps")
        epoch_steps = check_int(epoch_steps, "epoch_steps")
        record_every, callback_every, checkpoint_every = check_loop_settings(
            epoch_steps, record_every=record_every, seed=seed, callback=callback, callback_every=callback_every,
            blas_threads=blas_threads, checkpoint_every=checkpoint_every)
        if stagnation not in ("auto", True, False):
            raise ValueError(f"stagnation must be 'auto', True or False, got {stagnation!r}")
        reg = Regularization.coerce(reg)
        if engine(prob.net) == GRAPH:
            check_graph_settings(prob, reg, stagnation)
        cls.check_stability(prob.net, alpha, dt, prob.X)
        threads = resolve_threads(threads)
        if not isinstance(warm_start, (bool, np.bool_)):
            raise TypeError(f"warm_start must be True or False, got {warm_start!r}")
        if init is None or (isinstance(init, str) and init not in INITS):
            n_move = Layout.for_network(prob.net).free("yhat").start
            raise ValueError(f"unknown init {init!r}; expected 'random', 'forward', 'zeros' or an array of "
                             f"shape ({M}, {n_move})")
        return cls(alpha, beta, dt, steps, init, warm_start, epoch_steps, reg, record_every, seed,
                   callback_every, stagnation, blas_threads, checkpoint_every, threads)

    @staticmethod
    def check_stability(net, alpha, dt, X=None):
        """Refuse a step ``dt`` for which forward Euler certainly diverges (a method with a stable step
        of its own overrides this); ``X``: the inputs (where products of two values are bounded)."""
        if engine(net) == GRAPH:
            check_graph_step_size(net.graph, alpha, dt, X)
        else:
            check_step_size(net, alpha, dt)

    def identity(self):
        """The settings in a checkpoint's fingerprint (plain values)."""
        return dict(alpha=self.alpha, beta=self.beta, dt=self.dt, steps=self.steps,
                    init=self.init if isinstance(self.init, str) else "array", warm_start=self.warm_start,
                    epoch_steps=self.epoch_steps)

    def identity_arrays(self):
        """Arrays in a checkpoint's fingerprint beyond the data and the initial weights: an ``init`` array."""
        return [] if isinstance(self.init, str) else [np.asarray(self.init, dtype=np.float64)]

    @property
    def restart(self):
        """Initial state of the epochs after the first when ``warm_start`` is False."""
        return self.init if isinstance(self.init, str) else "forward"

    @property
    def n_epochs(self):
        return -(-self.steps // self.epoch_steps)


class ChainJointRun(EpochRun):
    """The state of one training run: weights ``theta``, stalks ``S``, kernel buffers, history."""

    def __init__(self, prob, cfg):
        net, X, Y = prob.net, prob.X, prob.Y
        self.prob, self.cfg, self.net = prob, cfg, net
        M = X.shape[0]
        self.layout = layout = Layout.for_network(net)
        self.off = off = layout.kernel_offsets()
        self.n_move = off.yhat_off
        self.rng = np.random.default_rng(cfg.seed)
        self.rng_start = self.rng.bit_generator.state     # the run's identity when seeded by a Generator
        self.theta = net.parameters()
        self.S = self.start_state(cfg.init)
        self.loss_kind = KERNEL_LOSS[prob.loss]
        self.loss_param = float(prob.loss_param)
        self.Xc = to_columns(X)
        self.F, self.E = np.zeros_like(self.S), np.zeros_like(self.S)
        self.phi_buf = np.zeros((net.dims[-1], M))
        self.work = np.zeros((max(net.dims), M))
        self.grad = np.zeros_like(self.theta)
        self.by_edge = np.zeros((len(layout.edge_blocks), M))
        reg = cfg.reg
        self.theta_anchor = self.theta.copy() if reg.anchor == "initial" else np.zeros_like(self.theta)
        if reg.lam == 0:
            self.S_anchor = np.zeros((1, 1))          # never read by the kernel
        else:
            self.S_anchor = self.S.copy() if reg.anchor == "initial" else np.zeros_like(self.S)
        n_ones = M * sum(b.size for b in layout.boundary_blocks if b.kind == "ones")
        self.fixed_sq = float(np.sum(X * X) + np.sum(Y * Y) + n_ones)
        out_mode = OUTPUT_EDGE_DISCREPANCY if prob.loss == "cross_entropy" else OUTPUT_EDGE_ADJOINT
        self.edge = OutputEdge(out_mode, PHI_CODES[net.output], self.loss_kind, self.loss_param)
        self.scratch = Scratch(self.F, self.E, self.phi_buf, self.work)
        self.history = History(method="sheaf", loss=prob.loss, edge_names=[b.name for b in layout.edge_blocks])
        self.rec = Recorder(self.history, net, X, Y, prob.X_test, prob.Y_test, prob.loss, prob.loss_param,
                            self.theta)
        self.step = 0
        self.rounds = Rounds(cfg.epoch_steps)   # an epoch in rounds of ~0.1 s: Ctrl-C is honoured
        self.steps = TiledSteps(self.Xc, off.dims, self.S.shape[0], self.theta.size, cfg.threads,
                                cfg.blas_threads)

    def start_state(self, method):
        """Free stalks ``(n_free, M)`` from an init name or array, with ``yhat`` pinned to the targets."""
        X, Y, layout = self.prob.X, self.prob.Y, self.layout
        if isinstance(method, str) and method == "random":
            S = self.rng.standard_normal((layout.n_free, X.shape[0]))
        elif isinstance(method, str):
            try:
                S = initial_state(self.net.with_parameters(self.theta), X, layout, method)
            except NetworkOverflowError:  # weights grown past float64: this epoch reports the divergence
                S = np.full((layout.n_free, X.shape[0]), np.nan)
        else:
            arr = as_float64(method, "init")
            if arr.ndim == 2 and arr.shape == (X.shape[0], self.n_move):
                arr = np.concatenate([arr, Y], axis=1)
            S = initial_state(self.net, X, layout, arr)
        S[layout.free("yhat")] = Y.T
        return np.ascontiguousarray(S)

    def rows(self):
        return to_rows(self.S)

    def diagnose(self):
        """Total/per-edge discord, edge-vector norm and extended-cochain norm of the current state."""
        off = self.off
        compute_forces(self.Xc, self.S, self.theta, off, self.edge, self.scratch)
        discord_by_edge_block(self.E, off, self.edge, self.by_edge)
        per_edge = self.by_edge.sum(axis=1)
        state_norm = math.sqrt(float(np.sum(self.S[:self.n_move] ** 2)) + self.fixed_sq)
        return float(per_edge.sum()), per_edge, float(np.linalg.norm(self.E)), state_norm

    def begin(self):
        """Record the initial state and the stagnation bound's inputs; returns the first epoch (1)."""
        total, per_edge, disagreement, state_norm = self.diagnose()
        self.rec.record(0, 0, self.theta, total, per_edge, state_norm)
        cfg = self.cfg
        stag = self.history.stagnation
        _stagnation.start(stag, cfg.alpha, cfg.beta, disagreement, state_norm)
        if _stagnation.wanted(cfg.stagnation, self.prob.X.shape[0] * self.n_move):
            stag["lambda_eff"] = effective_spectral_gap(self.net, self.prob.X, to_rows(self.S), self.layout)
        return 1

    def expected(self):
        """What a checkpoint of this run must hold (:class:`~sheaflinalg.training.checkpoint.RunShape`)."""
        cfg = self.cfg
        arrays = {"theta": self.theta.shape, "S": self.S.shape}
        if cfg.reg.lam > 0:
            arrays["S_anchor"] = self.S.shape
        return RunShape(arrays, ("S", self.layout.free("yhat"), self.prob.Y.T), cfg.steps, cfg.epoch_steps,
                        cfg.record_every, self.rng, self.history, len(self.net.weights), cfg.alpha, cfg.beta)

    def identity(self):
        """The network's part of the checkpoint's fingerprint."""
        return dict(network_identity(self.net), loss_param=self.loss_param, reg=vars(self.cfg.reg))

    def restore(self, saved):
        """The stalks (and their anchor) from a checkpoint's arrays."""
        self.S = np.ascontiguousarray(saved["S"])
        if self.cfg.reg.lam > 0:
            self.S_anchor = np.ascontiguousarray(saved["S_anchor"])

    def save(self, ckpt, epoch):
        arrays = {"theta": self.theta, "S": self.S}
        if self.cfg.reg.lam > 0:
            arrays["S_anchor"] = self.S_anchor
        ckpt.save(arrays,
                  {"epoch": epoch, "step": self.step, "rng": self.rng.bit_generator.state,
                   "history": dataclasses.asdict(self.history)})

    def run_epoch(self, epoch):
        """One epoch of compiled steps, recorded when due; False (state rolled back) if it diverged."""
        cfg, reg = self.cfg, self.cfg.reg
        n = min(cfg.epoch_steps, cfg.steps - self.step)
        if epoch > 1 and not cfg.warm_start:
            self.S = self.start_state(cfg.restart)
            if reg.anchor == "initial" and reg.lam > 0:
                self.S_anchor = self.S.copy()
        theta_prev, S_prev = self.theta.copy(), self.S.copy()
        done = self.advance(n)
        self.step += done
        finite = done == n and np.all(np.isfinite(self.theta)) and np.all(np.isfinite(self.S[:self.n_move]))
        if finite and (epoch % cfg.record_every == 0 or epoch == cfg.n_epochs):
            finite = self.record(epoch)
        if not finite:
            self.theta[:], self.S = theta_prev, S_prev
        return finite

    def advance(self, n):
        """``n`` compiled Euler steps of the state and the weights in place; returns the steps done."""
        cfg, reg = self.cfg, self.cfg.reg
        # The stalks' anchor is handed over by TiledSteps.packed, in the tiles' order.
        args = (self.theta, self.off, self.edge, Rates(cfg.alpha, cfg.beta, cfg.dt), self.n_move,
                Regularisation(reg.code("lam"), reg.lam, reg.l1_ratio, None),
                Regularisation(reg.code("mu"), reg.mu, reg.l1_ratio, self.theta_anchor), self.scratch, self.grad)
        with self.steps.packed(self.S, self.S_anchor):
            return self.rounds.run(n, lambda k: self.steps(k, *args))


def check_step_size(net, alpha, dt):
    """Cheap stability check of the state step (the weights are checked at the start only).

    The restricted coboundary of the training sheaf is ``I - N`` with ``N``
    block-subdiagonal, one block per block row and column, so
    ``1 + max_l ||W_l||^2 <= lambda_max(L) <= (1 + max(1, max_l ||W_l||))^2``
    over ``l >= 2`` (``W_1`` acts on the pinned input).  Raises ValueError when
    the lower bound already makes ``alpha dt lambda_max > 2`` (forward Euler
    certainly unstable); returns the upper-bound product otherwise.
    """
    norms = [np.linalg.norm(W, 2) for W in net.weights[1:]]
    top = max(norms) if norms else 0.0
    lower = max(1.0 + top * top, 2.0 if net.output == "identity" else 1.0)
    if alpha * dt * lower > 2.0:
        raise ValueError(f"unstable step size: alpha * dt * lambda_max >= {alpha * dt * lower:.3g} > 2 "
                         f"(lambda_max >= {lower:.4g} from the weights); forward Euler diverges, "
                         f"use dt < {2.0 / (alpha * lower):.3g}")
    return alpha * dt * (1.0 + max(1.0, top)) ** 2
