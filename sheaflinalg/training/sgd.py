"""The SGD baseline: full-batch gradient descent on the paper's losses (compiled loop)."""

import numpy as np

from .._common.progress import progress_bar
from .._common.rounds import Rounds
from .._common.threads import blas_limit, check_blas_threads
from .._common.validation import check_int, check_positive
from ..kernels.potentials import PHI_CODES
from ..kernels.structs import GDBuffers, Regularisation
from ..kernels.training import gd_steps
from ..sheaf.layout import Layout
from ..sheaf.state import to_columns
from .backpropagation import graph_descent
from .history import History, Recorder, Regularization, TrainingInfo, stop_diverged
from .problem import Problem, TrainResult
from ..network.paths import GRAPH, engine

GD_LOSS = {"mse": 0, "cross_entropy": 1, "l1": 2, "pnorm": 3, "huber": 4}


def sgd(net, X, Y, X_test=None, Y_test=None, lr=None, epochs=100_000, loss=None, loss_param=None,
        reg=None, record_every=None, progress=True, callback=None, callback_every=None,
        blas_threads=1):
    """Full-batch gradient descent ``theta -= lr * grad(loss)``, one step per epoch.

    The loss is the mean over the batch (mean squared error over all entries,
    cross-entropy averaged over samples, or the mean of the L1 / p-norm /
    Huber potential), the same loss :func:`~sheaflinalg.train` reports.

    Parameters
    ----------
    net : Network
        Initial weights (not modified).
    X, Y, X_test, Y_test : array_like
        As for :func:`~sheaflinalg.train`.
    lr : float, optional
        Learning rate; default 0.01 for sigmoid/softmax outputs, else 0.005
        (the paper's baseline).
    epochs : int
        Number of gradient steps.
    loss, loss_param : optional
        As for :func:`~sheaflinalg.train`.
    reg : Regularization or dict, optional
        Only ``mu`` (weight decay, L2/L1/elastic, anchored at zero or the
        initial weights) applies.
    record_every : int, optional
        Epochs between history records; default ``max(1, epochs // 100)``.
    progress : bool
    callback : callable, optional
        ``callback(info)`` (:class:`~sheaflinalg.training.history.TrainingInfo`,
        ``state=None``) after every epoch that is a multiple of
        ``callback_every`` (default ``record_every``).
    blas_threads : int or None
        BLAS threads during training (default 1; None leaves BLAS as is).

    Returns
    -------
    TrainResult
        ``.network`` and ``.history`` (unpacks as ``network, history``).

    Notes
    -----
    A graph network (convolutions, pooling, batch norm, residual additions, ...)
    descends by the exact gradient computed as backward substitution in its
    sheaf (:mod:`sheaflinalg.training.backpropagation`), one step at a time in Python;
    it takes the losses ``"mse"`` and ``"cross_entropy"`` and no ``reg``
    (GraphNetworkError otherwise).  Its ``history.weight_norms`` has one entry
    per node with parameters.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> X, Y = sl.tasks.paraboloid(100, seed=0)
    >>> fit = sl.sgd(sl.Network.random([2, 16, 1], seed=0), X, Y, epochs=500, progress=False)
    >>> bool(fit.history.train_loss[-1] < fit.history.train_loss[0])
    True
    """
    prob = Problem(net, X, Y, X_test, Y_test, loss, loss_param)
    if lr is None:
        lr = 0.01 if net.output in ("sigmoid", "softmax") else 0.005
    lr = check_positive(lr, "lr")
    epochs = check_int(epochs, "epochs")
    record_every = max(1, epochs // 100) if record_every is None else check_int(record_every, "record_every")
    callback_every = record_every if callback_every is None else check_int(callback_every, "callback_every")
    if callback is not None and not callable(callback):
        raise TypeError("callback must be callable")
    reg = Regularization.coerce(reg)
    if reg.lam > 0:
        raise ValueError("the SGD baseline has no state to regularise: reg.lam must be 0 (use mu)")
    check_blas_threads(blas_threads)

    history = History(method="sgd", loss=prob.loss)
    theta = net.parameters()
    path = engine(net)
    params, steps = graph_descent(prob, theta, reg, lr) if path == GRAPH else (None, _chain_steps(prob, theta, reg, lr))
    rec = Recorder(history, net, prob.X, prob.Y, prob.X_test, prob.Y_test, prob.loss, prob.loss_param, theta,
                   params=params)
    rec.record(0, 0, theta)
    chunk = int(np.gcd(record_every, callback_every)) if callback is not None else record_every
    done = 0
    rounds = Rounds(chunk)   # rounds of ~0.1 s of compiled steps: Ctrl-C is honoured
    with blas_limit(blas_threads), progress_bar(epochs, progress, "gradient descent", unit="epoch") as bar:
        while done < epochs:
            n = min(chunk, epochs - done)
            theta_prev = theta.copy()
            k = rounds.run(n, steps)
            done += k
            finite = k == n and np.all(np.isfinite(theta))
            if finite and (done % record_every == 0 or done == epochs):
                tr = rec.record(done, done, theta)
                if not np.isfinite(tr):
                    history.drop_last()
                    finite = False
            if not finite:
                theta[:] = theta_prev
                stop_diverged(history, done, done)
                break
            bar.update(n)
            if callback is not None and done % callback_every == 0:
                callback(TrainingInfo("sgd", done, done, rec.network(theta), prob.X, None, history))
    return TrainResult(rec.network(theta), history, path=path)


def _chain_steps(prob, theta, reg, lr):
    """``steps(m)``: ``m`` compiled gradient steps of a chain network on ``theta`` in place (returns m)."""
    net = prob.net
    off = Layout(net.dims).kernel_offsets()
    M = prob.X.shape[0]
    Xc, Yc = to_columns(prob.X), to_columns(prob.Y)
    theta_anchor = theta.copy() if reg.anchor == "initial" else np.zeros_like(theta)
    H = sum(net.dims[1:])
    bufs = GDBuffers(np.zeros((H, M)), np.zeros((H, M)), np.zeros((H, M)), np.zeros((net.dims[-1], M)),
                     np.zeros_like(theta))
    weight_reg = Regularisation(reg.code("mu"), reg.mu, reg.l1_ratio, theta_anchor)
    return lambda m: gd_steps(Xc, Yc, theta, off, PHI_CODES[net.output], GD_LOSS[prob.loss],
                              float(prob.loss_param), lr, m, weight_reg, bufs)
