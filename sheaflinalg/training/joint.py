"""Training by joint dynamics of the state and the restriction maps (paper section 5.2).

The output vertex is pinned to the target, the input vertex to the data;
the free cochain and the weights evolve together by forward Euler, every
force taken from the old state and the old weights (see
:mod:`sheaflinalg.kernels.training`); the whole loop of an epoch runs in
compiled code on the shared force routine of the heat equation.

:func:`train` reads as its steps: validate the settings (:class:`_Settings`),
set up the run (:class:`_JointRun`: layout, buffers, initial state, history),
resume from a checkpoint or record the initial state, run the epoch loop
(:func:`~sheaflinalg.training.epochs.epoch_loop`); a graph network runs
:class:`~sheaflinalg.training.graph_joint.GraphJointRun` in the same loop, and close the stagnation bound (:mod:`.stagnation`).
"""

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .._common.options import method_options
from .._common.rounds import Rounds
from .._common.threads import check_blas_threads, resolve_threads
from .._common.validation import as_float64, check_int, check_positive, check_seed
from ..kernels.force import (LOSS_CODES, OUTPUT_EDGE_ADJOINT, OUTPUT_EDGE_DISCREPANCY, PHI_CODES, compute_forces,
                             discord_by_edge_block)
from ..kernels.structs import OutputEdge, Rates, Regularisation, Scratch
from ..network.model import Network, NetworkOverflowError
from ..sheaf.layout import Layout
from ..sheaf.state import INITS, initial_state, to_columns, to_rows
from . import stagnation as _stagnation
from .checkpoint import RunShape, TrainingCheckpoint, check_checkpoint_path
from .epochs import EpochRun, epoch_loop
from .graph_joint import GraphJointRun, check_graph_settings, check_graph_step_size
from .history import History, Recorder, Regularization
from .problem import Problem
from .stagnation import effective_spectral_gap
from .tiled import TiledSteps

KERNEL_LOSS = {"mse": LOSS_CODES["squared"], "l1": LOSS_CODES["l1"], "pnorm": LOSS_CODES["pnorm"],
               "huber": LOSS_CODES["huber"], "cross_entropy": LOSS_CODES["squared"]}


#: The training methods and the options only they use (see :func:`~sheaflinalg._common.options.method_options`).
METHODS = {"euler": ()}


def train(net, X, Y, X_test=None, Y_test=None, alpha=1.0, beta=None, dt=0.005, steps=100_000,
          init="random", warm_start=True, epoch_steps=1000, loss=None, loss_param=None, reg=None,
          record_every=1, seed=None, progress=True, callback=None, callback_every=None,
          stagnation="auto", blas_threads=1, checkpoint=None, checkpoint_every=10, threads=None, method="euler"):
    """Train a network by the joint dynamics of its neural sheaf (paper eq. joint-dynamics).

    Parameters
    ----------
    net : Network
        Initial weights (not modified).
    X : array_like, shape (n_samples, n_0)
    Y : array_like, shape (n_samples, n_out)
        Targets; 1-D for one output, or integer labels for a softmax output.
    X_test, Y_test : array_like, optional
        Held-out data for the test loss.
    alpha, beta : float
        Rates of the state and weight dynamics; ``beta=None`` is ``1 / n_samples``.
    dt : float
        Euler step.
    steps : int
        Total number of Euler steps.
    init : {"random", "forward", "zeros"} or array_like
        Initial free stalks: N(0, 1) draws, the forward pass, zeros, or an
        explicit ``(n_samples, n_free)`` array in the order ``z1, a1, ..., z(k+1)``
        (optionally followed by ``yhat``, which is overwritten by the targets).
    warm_start : bool
        Keep the stalks across epochs.  When False every epoch after the first
        restarts from ``init`` (from ``"forward"`` when ``init`` is an array);
        the paper's classification runs use ``init="forward", warm_start=False``.
    epoch_steps : int
        Steps per epoch (the unit of records, callbacks and restarts).
    loss : {"mse", "l1", "pnorm", "huber", "cross_entropy"}, optional
        Default: cross-entropy for sigmoid/softmax outputs, else mean squared error.
    loss_param : float, optional
        ``p`` of the p-norm loss (default 1.5) or ``tau`` of the Huber loss (default 1).
    reg : Regularization or dict, optional
        State/weight regularisation (``lam``, ``mu``, ``kind``, ``l1_ratio``, ``anchor``).
    record_every : int
        Record the history every this many epochs (and after the last one).
    seed : int, optional
        Seed of the random stalks.
    progress : bool
        Show a tqdm progress bar over epochs.
    callback : callable, optional
        ``callback(info)`` with a :class:`~sheaflinalg.training.history.TrainingInfo`
        after every epoch whose end step is a multiple of ``callback_every``
        (default ``epoch_steps``).
    stagnation : {"auto", True, False}
        Record the structural stagnation bound's spectral gap (an eigenvalue
        solve at the initial state); "auto" does it for batches of at most
        400k moving coordinates.
    blas_threads : int or None
        BLAS threads during training (large layer products); default 1, which
        is fastest when other work shares the cores; None leaves BLAS as is.
    checkpoint : str or path-like, optional
        ``.npz`` file for resumable runs.  If it exists (written by an earlier,
        possibly interrupted call with the same network, data and settings), the
        run continues from it exactly as if it had never stopped; it is
        (re)written atomically every ``checkpoint_every`` epochs and at the end.
        A checkpoint of a different run is refused.
    checkpoint_every : int
        Epochs between checkpoints.
    threads : int, optional
        Threads that share the batch's tiles at every step; any positive
        integer, default :func:`sheaflinalg.get_num_threads`.  A big batch is
        cut into tiles by its size and the network alone (at least 256
        samples and 2^18 multiply-adds per step each, at most 16:
        :func:`~sheaflinalg.kernels.training.train_tiles`), each adding its
        share of the weight velocity in tile order, so the result is the
        same bit for bit for any number of threads; smaller batches are one
        tile, as before.  The tiles run in parallel only while that is
        measured faster than one thread (see :mod:`sheaflinalg.training.tiled`).
    method : {"euler"}
        ``"euler"``: the paper's joint state/weight dynamics by forward Euler (the only method
        today; another is refused, naming the choices).

    Returns
    -------
    TrainResult
        ``.network``, ``.history`` (unpacks as ``network, history``), ``.state``.

    Raises
    ------
    ValueError
        Bad shapes, NaN, targets that do not fit the output activation,
        ``beta``/``dt``/``alpha <= 0``, or an unstable step size.

    Notes
    -----
    A graph network (convolutions, pooling, batch norm, residual additions,
    ...) runs the same dynamics on its graph sheaf
    (:mod:`sheaflinalg.training.graph_joint`): shared convolution weights move
    by their velocity summed over positions, a batch norm by its folded
    per-channel affine.  It takes the losses ``"mse"`` and
    ``"cross_entropy"``, no ``reg``, and records no stagnation gap; the step
    runs on one thread (``threads`` does not apply) and ``init`` arrays are
    every node's value in the layout's order.

    If the run diverges, training stops at that epoch with a
    :class:`~sheaflinalg.training.history.DivergenceWarning` naming the epoch and the
    last finite loss; the weights of the last finite epoch are returned and
    ``history.diverged`` is True.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> X, Y = sl.tasks.paraboloid(100, seed=0)
    >>> net = sl.Network.random([2, 16, 1], seed=0)
    >>> fit = sl.train(net, X, Y, steps=2000, progress=False)
    >>> bool(fit.history.train_loss[-1] < fit.history.train_loss[0])
    True
    """
    method_options("train", method, METHODS, {})
    prob = Problem(net, X, Y, X_test, Y_test, loss, loss_param)
    cfg = _Settings.check(prob, alpha=alpha, beta=beta, dt=dt, steps=steps, init=init, warm_start=warm_start,
                          epoch_steps=epoch_steps, reg=reg, record_every=record_every, seed=seed,
                          callback=callback, callback_every=callback_every, stagnation=stagnation,
                          blas_threads=blas_threads, checkpoint_every=checkpoint_every, threads=threads)
    if checkpoint is not None:
        check_checkpoint_path(checkpoint)
    run = GraphJointRun(prob, cfg) if prob.net.is_graph else _JointRun(prob, cfg)
    ckpt = None if checkpoint is None else TrainingCheckpoint(checkpoint, run.fingerprint())
    resumed = ckpt.load(run.expected()) if ckpt is not None else None
    first_epoch = run.resume(resumed) if resumed is not None else run.begin()
    epoch_loop(run, first_epoch, ckpt, callback, progress)
    _stagnation.finish(run.history.stagnation, run.history.weight_displacement)
    return run.result()


@dataclass
class _Settings:
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
        record_every = check_int(record_every, "record_every")
        callback_every = epoch_steps if callback_every is None else check_int(callback_every, "callback_every")
        if callback is not None and not callable(callback):
            raise TypeError("callback must be callable")
        if stagnation not in ("auto", True, False):
            raise ValueError(f"stagnation must be 'auto', True or False, got {stagnation!r}")
        reg = Regularization.coerce(reg)
        if prob.net.is_graph:
            check_graph_settings(prob, reg, stagnation)
            check_graph_step_size(prob.net.graph, alpha, dt)
        else:
            check_step_size(prob.net, alpha, dt)
        check_blas_threads(blas_threads)
        checkpoint_every = check_int(checkpoint_every, "checkpoint_every")
        threads = resolve_threads(threads)
        check_seed(seed)
        if not isinstance(warm_start, (bool, np.bool_)):
            raise TypeError(f"warm_start must be True or False, got {warm_start!r}")
        if init is None or (isinstance(init, str) and init not in INITS):
            n_move = Layout.for_network(prob.net).free("yhat").start
            raise ValueError(f"unknown init {init!r}; expected 'random', 'forward', 'zeros' or an array of "
                             f"shape ({M}, {n_move})")
        return cls(alpha, beta, dt, steps, init, warm_start, epoch_steps, reg, record_every, seed,
                   callback_every, stagnation, blas_threads, checkpoint_every, threads)

    @property
    def restart(self):
        """Initial state of the epochs after the first when ``warm_start`` is False."""
        return self.init if isinstance(self.init, str) else "forward"

    @property
    def n_epochs(self):
        return -(-self.steps // self.epoch_steps)


class _JointRun(EpochRun):
    """The state of one training run: weights ``theta``, stalks ``S``, kernel buffers, history."""

    def __init__(self, prob, cfg):
        net, X, Y = prob.net, prob.X, prob.Y
        self.prob, self.cfg, self.net = prob, cfg, net
        M = X.shape[0]
        self.layout = layout = Layout(net.dims)
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
                S = initial_state(Network.from_parameters(self.theta, self.net.dims, self.net.output), X, layout,
                                  method)
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
        return dict(dims=self.net.dims, output=self.net.output, loss_param=self.loss_param, reg=vars(self.cfg.reg))

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
        # The stalks' anchor is handed over by TiledSteps.packed, in the tiles' order.
        args = (self.theta, self.off, self.edge, Rates(cfg.alpha, cfg.beta, cfg.dt), self.n_move,
                Regularisation(reg.code("lam"), reg.lam, reg.l1_ratio, None),
                Regularisation(reg.code("mu"), reg.mu, reg.l1_ratio, self.theta_anchor), self.scratch, self.grad)
        with self.steps.packed(self.S, self.S_anchor):
            done = self.rounds.run(n, lambda k: self.steps(k, *args))
        self.step += done
        finite = done == n and np.all(np.isfinite(self.theta)) and np.all(np.isfinite(self.S[:self.n_move]))
        if finite and (epoch % cfg.record_every == 0 or epoch == cfg.n_epochs):
            finite = self.record(epoch)
        if not finite:
            self.theta[:], self.S = theta_prev, S_prev
        return finite


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
