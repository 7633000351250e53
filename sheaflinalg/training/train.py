"""``train``: the public entry of sheaf training; validates the data and runs the chosen method.

Methods live in their own subpackages (``euler``: the paper's joint dynamics by
forward Euler; ``equilibrium``: exact equilibria per mini-batch and an
optimiser on the weights).  Options that only one method uses are flat keywords refused
by the other methods (:func:`~sheaflinalg._common.options.method_options`),
as for :func:`~sheaflinalg.heat`.
"""

from .._common.options import Default, method_options
from .equilibrium import DEFAULTS as EQUILIBRIUM_DEFAULTS
from .equilibrium import run_equilibrium
from .euler import run_euler
from .euler.chain import DEFAULTS as EULER_DEFAULTS
from .imex import DEFAULTS as IMEX_DEFAULTS
from .imex import run_imex
from ..network.paths import engine
from .problem import Problem


#: The training methods and the options only they use (see :func:`~sheaflinalg._common.options.method_options`).
METHODS = {"euler": tuple(EULER_DEFAULTS), "equilibrium": tuple(EQUILIBRIUM_DEFAULTS), "imex": tuple(IMEX_DEFAULTS)}
_E, _Q, _I = ({name: Default(value) for name, value in d.items()}
              for d in (EULER_DEFAULTS, EQUILIBRIUM_DEFAULTS, IMEX_DEFAULTS))


def train(net, X, Y, X_test=None, Y_test=None, alpha=_E["alpha"], beta=_E["beta"], dt=_E["dt"], steps=_E["steps"],
          init=_E["init"], warm_start=_E["warm_start"], epoch_steps=_E["epoch_steps"], loss=None, loss_param=None,
          reg=_E["reg"], record_every=1, seed=None, progress=True, callback=None, callback_every=None,
          stagnation=_E["stagnation"], blas_threads=1, checkpoint=None, checkpoint_every=10, threads=_E["threads"],
          method="euler", epochs=_Q["epochs"], batch_size=_Q["batch_size"], optimizer=_Q["optimizer"], lr=_Q["lr"],
          schedule=_Q["schedule"], nudging=_Q["nudging"], symmetric=_Q["symmetric"],
          max_pattern_iterations=_Q["max_pattern_iterations"], tol=_I["tol"]):
    """Train a network by the joint dynamics of its neural sheaf (paper eq. joint-dynamics), or at equilibrium.

    ``method="euler"`` (the default) integrates the paper's joint state/weight
    dynamics by forward Euler; ``method="equilibrium"`` finds, for every
    mini-batch, the exact equilibrium of the state under the current weights
    and steps the weights by an optimiser along the equilibrium energy's
    gradient (quasi-static training).  Options shown as ``<default ...>`` belong
    to one method; giving one to the other method is refused (ValueError
    naming the option and the method).

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
        Euler: rates of the state and weight dynamics (default 1 and ``1 / n_samples``).
    dt : float
        Euler step (default 0.005).
    steps : int
        Euler: total number of steps (default 100000).
    init : {"random", "forward", "zeros"} or array_like
        Euler: initial free stalks (default "random"): N(0, 1) draws, the forward pass, zeros, or an
        explicit ``(n_samples, n_free)`` array in the order ``z1, a1, ..., z(k+1)``
        (optionally followed by ``yhat``, which is overwritten by the targets).
    warm_start : bool
        Euler: keep the stalks across epochs.  When False every epoch after the first
        restarts from ``init`` (from ``"forward"`` when ``init`` is an array);
        the paper's classification runs use ``init="forward", warm_start=False``.
    epoch_steps : int
        Euler: steps per epoch (the unit of records, callbacks and restarts; default 1000).
    loss : {"mse", "l1", "pnorm", "huber", "cross_entropy"}, optional
        Default: cross-entropy for sigmoid/softmax outputs, else mean squared error.
    loss_param : float, optional
        ``p`` of the p-norm loss (default 1.5) or ``tau`` of the Huber loss (default 1).
    reg : Regularization or dict, optional
        Euler: state/weight regularisation (``lam``, ``mu``, ``kind``, ``l1_ratio``, ``anchor``).
    record_every : int
        Record the history every this many epochs (and after the last one).
    seed : int or numpy.random.Generator, optional
        Seed of the random stalks (Euler) or of the mini-batches' order (equilibrium).
    progress : bool
        Show a tqdm progress bar over epochs.
    callback : callable, optional
        ``callback(info)`` with a :class:`~sheaflinalg.training.history.TrainingInfo`
        after every epoch whose end step (Euler steps, or optimiser steps at
        equilibrium) is a multiple of ``callback_every`` (default: one epoch).
    stagnation : {"auto", True, False}
        Euler: record the structural stagnation bound's spectral gap (an eigenvalue
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
        Euler: threads that share the batch's tiles at every step; any positive
        integer, default :func:`sheaflinalg.get_num_threads`.  A big batch is
        cut into tiles by its size and the network alone (at least 256
        samples and 2^18 multiply-adds per step each, at most 16:
        :func:`~sheaflinalg.kernels.training.train_tiles`), each adding its
        share of the weight velocity in tile order, so the result is the
        same bit for bit for any number of threads; smaller batches are one
        tile, as before.  The tiles run in parallel only while that is
        measured faster than one thread (see :mod:`sheaflinalg.training.euler.tiled`).
    method : {"euler", "equilibrium", "imex"}
        ``"euler"``: the paper's joint state/weight dynamics by forward Euler;
        ``"equilibrium"``: exact equilibria per mini-batch (see Notes); ``"imex"``: the joint
        dynamics over the same model time ``steps * dt`` (epochs of ``epoch_steps * dt``) by adaptive
        steps, linearly implicit in the state and explicit in the weights, that respect the ReLU
        boundaries (:mod:`sheaflinalg.training.imex`); ``dt`` is its first step, any positive value.
        Chains only, no ``reg``, one thread (``threads`` is refused); returns an
        :class:`~sheaflinalg.training.imex.ImexResult`.
    epochs : int
        Equilibrium: passes over the training data (default 100).
    batch_size : int, optional
        Equilibrium: samples per mini-batch, in ``[1, n_samples]`` (default 100, or all samples
        when there are fewer); the samples are shuffled every epoch by ``seed`` and the last,
        partial batch is kept.
    optimizer : str or sheaflinalg.optim.Optimizer
        Equilibrium: ``"sgd"``, ``"momentum"``, ``"nesterov"``, ``"adam"`` (default) or
        ``"adamw"``, or an instance such as ``sl.optim.AdamW(lr=1e-3, weight_decay=1e-2)``.
    lr : float, optional
        Equilibrium: learning rate of an optimiser given by name (default: 1e-3 for Adam and
        AdamW, 1e-2 for the others); an instance carries its own.
    schedule : str or sheaflinalg.optim.Schedule, optional
        Equilibrium: ``"constant"`` (default), ``"step"``, ``"exponential"`` or ``"cosine"``, or an
        instance such as ``sl.optim.Cosine(warmup=100)``; steps are mini-batches.
    nudging : float
        Equilibrium: weight ``b > 0`` of the output edge's loss potential in the equilibrium
        (default 1e-6, measured: see docs/guide.md); the gradient is backpropagation's to ``O(b)``.
    symmetric : bool
        Equilibrium: average the gradients at ``+b`` and ``-b`` (bias ``O(b^2)``, two equilibria
        per batch; default False).
    max_pattern_iterations : int
        Equilibrium: cap on the iterations to a self-consistent activation pattern (default 20).
    tol : float
        IMEX: tolerance of the step's error estimate (default 1e-4).

    Returns
    -------
    TrainResult
        ``.network``, ``.history`` (unpacks as ``network, history``), ``.state`` (Euler only).

    Raises
    ------
    ValueError
        Bad shapes, NaN, targets that do not fit the output activation,
        ``beta``/``dt``/``alpha <= 0``, an unstable step size, an option of the
        other method, a batch size outside ``[1, n_samples]``, an unknown
        optimiser or schedule, ``lr``/``nudging`` not finite and ``> 0``.

    Notes
    -----
    A graph network (convolutions, pooling, batch norm, residual additions,
    ...) runs the same dynamics on its graph sheaf
    (:mod:`sheaflinalg.training.euler.graph`): shared convolution weights move
    by their velocity summed over positions, a batch norm by its folded
    per-channel affine.  It takes the losses ``"mse"`` and
    ``"cross_entropy"``, no ``reg``, and records no stagnation gap; the step
    runs on one thread (``threads`` does not apply) and ``init`` arrays are
    every node's value in the layout's order.

    ``method="equilibrium"``: for fixed weights, the state of each sample
    minimises the sheaf energy plus ``nudging`` times the output edge's loss,
    with the activation pattern read off the state itself (iterated to a
    self-consistent pattern, Filippov sliding on switching surfaces, at most
    ``max_pattern_iterations``); the weights move against the gradient of that
    equilibrium energy divided by the nudging (envelope theorem), scaled to
    estimate the gradient of the batch's mean loss.  Samples whose pattern did
    not settle are counted in ``history.unsettled`` and announced once by an
    :class:`~sheaflinalg.training.equilibrium.UnsettledWarning`.  Losses: mse and
    cross-entropy.  The checkpoint also holds the optimiser's state.

    If the run diverges, training stops at that epoch with a
    :class:`~sheaflinalg.training.history.DivergenceWarning` naming the epoch and the
    last finite loss (the equilibrium method stops at the first non-finite
    gradient or weight); the weights of the last finite epoch are returned and
    ``history.diverged`` is True.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> X, Y = sl.tasks.paraboloid(100, seed=0)
    >>> net = sl.Network.random([2, 16, 1], seed=0)
    >>> fit = sl.train(net, X, Y, steps=2000, progress=False)
    >>> bool(fit.history.train_loss[-1] < fit.history.train_loss[0])
    True
    >>> fit = sl.train(net, X, Y, method="equilibrium", epochs=5, batch_size=20, lr=1e-2, seed=0, progress=False)
    >>> bool(fit.history.train_loss[-1] < fit.history.train_loss[0]), fit.history.step[-1]
    (True, 25)
    """
    own = method_options("train", method, METHODS, dict(
        alpha=alpha, beta=beta, dt=dt, steps=steps, init=init, warm_start=warm_start, epoch_steps=epoch_steps,
        reg=reg, stagnation=stagnation, threads=threads, epochs=epochs, batch_size=batch_size, optimizer=optimizer,
        lr=lr, schedule=schedule, nudging=nudging, symmetric=symmetric, max_pattern_iterations=max_pattern_iterations,
        tol=tol))
    prob = Problem(net, X, Y, X_test, Y_test, loss, loss_param)
    settings = dict(own, record_every=record_every, seed=seed, callback_every=callback_every,
                    blas_threads=blas_threads, checkpoint_every=checkpoint_every)
    run = {"euler": run_euler, "equilibrium": run_equilibrium, "imex": run_imex}[method]
    result = run(prob, settings, checkpoint, callback, progress)
    result.path = engine(net)
    return result
