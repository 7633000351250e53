"""``train``: the public entry of sheaf training; validates the data and runs the chosen method.

Methods live in their own subpackages (``euler``: the paper's joint dynamics by
forward Euler).  Options that only one method uses are flat keywords refused
by the other methods (:func:`~sheaflinalg._common.options.method_options`),
as for :func:`~sheaflinalg.heat`.
"""

from .._common.options import Default, method_options
from .euler import run_euler
from .imex import run_imex
from .problem import Problem


#: The training methods and the options only they use (see :func:`~sheaflinalg._common.options.method_options`).
METHODS = {"euler": (), "imex": ("tol",)}


def train(net, X, Y, X_test=None, Y_test=None, alpha=1.0, beta=None, dt=0.005, steps=100_000,
          init="random", warm_start=True, epoch_steps=1000, loss=None, loss_param=None, reg=None,
          record_every=1, seed=None, progress=True, callback=None, callback_every=None,
          stagnation="auto", blas_threads=1, checkpoint=None, checkpoint_every=10, threads=None, method="euler", tol=Default(1e-4)):
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
        measured faster than one thread (see :mod:`sheaflinalg.training.euler.tiled`).
    method : {"euler", "imex"}
        ``"euler"``: the paper's joint state/weight dynamics by forward Euler.  ``"imex"``: the same
        dynamics over the same model time ``steps * dt`` (epochs of ``epoch_steps * dt``) by adaptive
        steps, linearly implicit in the state and explicit in the weights, that respect the ReLU
        boundaries (:mod:`sheaflinalg.training.imex`); ``dt`` is its first step, any positive value.
        Chains only, no ``reg``, one thread; returns an :class:`~sheaflinalg.training.imex.ImexResult`.
    tol : float
        ``method="imex"`` only: tolerance of the step's error estimate (default 1e-4).

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
    (:mod:`sheaflinalg.training.euler.graph`): shared convolution weights move
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
    options = method_options("train", method, METHODS, {"tol": tol})
    prob = Problem(net, X, Y, X_test, Y_test, loss, loss_param)
    settings = dict(alpha=alpha, beta=beta, dt=dt, steps=steps, init=init, warm_start=warm_start,
                    epoch_steps=epoch_steps, reg=reg, record_every=record_every, seed=seed,
                    callback_every=callback_every, stagnation=stagnation, blas_threads=blas_threads,
                    checkpoint_every=checkpoint_every, threads=threads)
    if method == "imex":
        return run_imex(prob, settings, options["tol"], checkpoint, callback, progress)
    return run_euler(prob, settings, checkpoint, callback, progress)
