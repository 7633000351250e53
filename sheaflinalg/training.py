"""Training by joint dynamics of the state and the restriction maps (paper section 5.2).

The output vertex is pinned to the target, the input vertex to the data;
the free cochain and the weights evolve together by forward Euler, every
force taken from the old state and the old weights (see
:mod:`sheaflinalg.kernels.training`); the whole loop of an epoch runs in
compiled code on the shared force routine of the heat equation.
"""

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .checkpoint import TrainingCheckpoint, fingerprint
from .history import History, Recorder, Regularization, TrainingInfo, stop_diverged
from .kernels.force import (LOSS_CODES, OUTPUT_EDGE_ADJOINT, OUTPUT_EDGE_DISCREPANCY, PHI_CODES,
                            compute_forces, discord_by_edge_block)
from .kernels.training import train_steps
from .layout import Layout
from .losses import check_targets, resolve_loss
from .network import Network
from .state import initial_state, to_columns, to_rows
from .validation import as_samples, check_positive

KERNEL_LOSS = {"mse": LOSS_CODES["squared"], "l1": LOSS_CODES["l1"], "pnorm": LOSS_CODES["pnorm"],
               "huber": LOSS_CODES["huber"], "cross_entropy": LOSS_CODES["squared"]}
_STAGNATION_MAX_SIZE = 400_000
_DENSE_GAP_MAX = 20_000_000   # batched dense eigvalsh up to this many block entries, else ARPACK


@dataclass
class TrainResult:
    """Result of :func:`train` / :func:`sgd`; unpacks as ``network, history = result``.

    Attributes
    ----------
    network : Network
        The trained network (the weights of the last finite epoch if the run diverged).
    history : History
    state : ndarray or None
        Final free cochain, ``(n_samples, n_free)`` in ``layout``'s order (None for SGD).
    layout : Layout or None
    """

    network: Network
    history: History
    state: object = None
    layout: object = None

    def __iter__(self):
        return iter((self.network, self.history))


class _Problem:
    """Validated inputs shared by :func:`train` and :func:`sgd`."""

    def __init__(self, net, X, Y, X_test, Y_test, loss, loss_param):
        if not isinstance(net, Network):
            raise TypeError(f"net must be a sheaflinalg.Network, got {type(net).__name__}")
        self.net = net
        self.loss, self.loss_param = resolve_loss(loss, loss_param, net.output)
        n0, n_out = net.dims[0], net.dims[-1]
        self.X, _ = as_samples(X, n0, "X")
        self.Y = check_targets(Y, self.X.shape[0], n_out, net.output, self.loss, "Y")
        if (X_test is None) != (Y_test is None):
            raise ValueError("give both X_test and Y_test, or neither")
        if X_test is not None:
            self.X_test, _ = as_samples(X_test, n0, "X_test")
            self.Y_test = check_targets(Y_test, self.X_test.shape[0], n_out, net.output, self.loss, "Y_test")
        else:
            self.X_test = self.Y_test = None


def _positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


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


def effective_spectral_gap(net, X, state_rows, layout):
    """Smallest eigenvalue of the training sheaf's Laplacian on the moving stalks.

    The Laplacian is ``delta'^T delta'`` with the output vertex pinned and the
    output edge taken as the identity (as in the cross-entropy dynamics),
    the ReLU masks ``z >= 0`` of ``state_rows``; the batch is block diagonal
    so this is the minimum over samples.  It is the ``lambda_eff`` of the
    structural stagnation bound (section 5.3).
    """
    import scipy.sparse.linalg as spla

    from .assembly import assemble

    M = X.shape[0]
    n_free = layout.n_free
    keep = np.ones(n_free, dtype=bool)
    keep[layout.free("yhat")] = False
    n_move = int(keep.sum())
    if M * n_free * n_move <= _DENSE_GAP_MAX:
        # Per-sample coboundary on the moving stalks, written from the layout's
        # blocks: edge e pairs with free block e (unit-triangular order), the
        # output edge (rows of yhat) sees z(k+1) through the identity.
        D = np.zeros((M, n_free, n_move))
        for l in range(1, net.n_hidden + 2):
            z = layout.free(f"z{l}")
            D[:, z, z] = np.eye(z.stop - z.start)
            if l > 1:
                D[:, z, layout.free(f"a{l - 1}")] = -net.weights[l - 1]
            if l <= net.n_hidden:
                a = layout.free(f"a{l}")
                D[:, a, a] = np.eye(a.stop - a.start)
                mask = (state_rows[:, z] >= 0).astype(np.float64)
                D[:, a, z] = -mask[:, :, None] * np.eye(z.stop - z.start)
        D[:, layout.free("yhat"), z] = -np.eye(z.stop - z.start)
        L = np.matmul(D.transpose(0, 2, 1), D)
        return float(np.linalg.eigvalsh(L)[:, 0].min())
    lin = Network(net.weights, net.biases, "identity")
    pattern = [state_rows[:, layout.free(f"z{l}")] >= 0 for l in range(1, net.n_hidden + 1)]
    L = assemble(lin, X, pattern=pattern).laplacian_free.tocsr()
    L.sum_duplicates()
    L = L.tocoo()
    idx = (np.arange(M)[:, None] * n_free + np.flatnonzero(keep)[None, :]).ravel()
    L = L.tocsr()[idx][:, idx].tocsc()
    val = spla.eigsh(L, k=1, sigma=0.0, which="LM", return_eigenvectors=False)
    return float(val[0])


def train(net, X, Y, X_test=None, Y_test=None, alpha=1.0, beta=None, dt=0.005, steps=100_000,
          init="random", warm_start=True, epoch_steps=1000, loss=None, loss_param=None, reg=None,
          record_every=1, seed=None, progress=True, callback=None, callback_every=None,
          stagnation="auto", blas_threads=1, checkpoint=None, checkpoint_every=10):
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
        ``callback(info)`` with a :class:`~sheaflinalg.history.TrainingInfo`
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
    If the run diverges, training stops at that epoch with a
    :class:`~sheaflinalg.history.DivergenceWarning` naming the epoch and the
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
    prob = _Problem(net, X, Y, X_test, Y_test, loss, loss_param)
    X, Y = prob.X, prob.Y
    M = X.shape[0]
    alpha = check_positive(alpha, "alpha")
    beta = 1.0 / M if beta is None else check_positive(beta, "beta")
    dt = check_positive(dt, "dt")
    steps = _positive_int(steps, "steps")
    epoch_steps = _positive_int(epoch_steps, "epoch_steps")
    record_every = _positive_int(record_every, "record_every")
    callback_every = epoch_steps if callback_every is None else _positive_int(callback_every, "callback_every")
    if callback is not None and not callable(callback):
        raise TypeError("callback must be callable")
    if stagnation not in ("auto", True, False):
        raise ValueError(f"stagnation must be 'auto', True or False, got {stagnation!r}")
    reg = Regularization.coerce(reg)
    check_step_size(net, alpha, dt)
    _check_threads(blas_threads)
    checkpoint_every = _positive_int(checkpoint_every, "checkpoint_every")

    layout = Layout(net.dims)
    off = layout.kernel_offsets()
    n_move = off["yhat_off"]
    yhat = layout.free("yhat")
    rng = np.random.default_rng(seed)

    def start_state(method):
        if isinstance(method, str) and method == "random":
            S = rng.standard_normal((layout.n_free, M))
        elif isinstance(method, str):
            S = initial_state(net_now(), X, layout, method)
        else:
            arr = np.asarray(method, dtype=np.float64) if not isinstance(method, np.ndarray) else method
            if arr.ndim == 2 and arr.shape == (M, n_move):
                arr = np.concatenate([arr, Y], axis=1)
            S = initial_state(net, X, layout, arr)
        S[yhat] = Y.T
        return np.ascontiguousarray(S)

    theta = net.parameters()

    def net_now():
        return Network.from_parameters(theta, net.dims, net.output)

    if init is None or (isinstance(init, str) and init not in ("random", "forward", "zeros")):
        raise ValueError(f"unknown init {init!r}; expected 'random', 'forward', 'zeros' or an array of shape "
                         f"({M}, {n_move})")
    restart = init if isinstance(init, str) else "forward"
    S = start_state(init)

    out_mode = OUTPUT_EDGE_DISCREPANCY if prob.loss == "cross_entropy" else OUTPUT_EDGE_ADJOINT
    phi_code = PHI_CODES[net.output]
    loss_kind = KERNEL_LOSS[prob.loss]
    loss_param = float(prob.loss_param)
    Xc = to_columns(X)
    F = np.zeros_like(S)
    E = np.zeros_like(S)
    phi_buf = np.zeros((net.dims[-1], M))
    work = np.zeros((max(net.dims), M))
    grad = np.zeros_like(theta)
    by_edge = np.zeros((len(layout.edge_blocks), M))
    theta_anchor = theta.copy() if reg.anchor == "initial" else np.zeros_like(theta)
    if reg.lam == 0:
        S_anchor = np.zeros((1, 1))          # never read by the kernel
    else:
        S_anchor = S.copy() if reg.anchor == "initial" else np.zeros_like(S)
    n_ones = M * sum(b.size for b in layout.boundary_blocks if b.kind == "ones")
    fixed_sq = float(np.sum(X * X) + np.sum(Y * Y) + n_ones)
    kern = (off["dims"], off["zoff"], off["aoff"], off["woff"], off["boff"], off["yhat_off"],
            out_mode, phi_code, loss_kind, loss_param)

    def diagnose(S):
        """Total/per-edge discord, edge-vector norm and extended-cochain norm of state S."""
        compute_forces(Xc, S, theta, *kern, F, E, phi_buf, work)
        discord_by_edge_block(E, off["edge_offsets"], off["edge_sizes"], off["yhat_off"],
                              loss_kind, loss_param, by_edge)
        per_edge = by_edge.sum(axis=1)
        state_norm = math.sqrt(float(np.sum(S[:n_move] ** 2)) + fixed_sq)
        return float(per_edge.sum()), per_edge, float(np.linalg.norm(E)), state_norm

    history = History(method="sheaf", loss=prob.loss, edge_names=[b.name for b in layout.edge_blocks])
    rec = Recorder(history, net, X, Y, prob.X_test, prob.Y_test, prob.loss, prob.loss_param, theta)
    ckpt = None
    if checkpoint is not None:
        settings = dict(dims=net.dims, output=net.output, alpha=alpha, beta=beta, dt=dt, steps=steps,
                        init=init if isinstance(init, str) else "array", warm_start=warm_start,
                        epoch_steps=epoch_steps, loss=prob.loss, loss_param=loss_param, reg=vars(reg),
                        record_every=record_every, seed=seed)
        arrays = [X, Y, theta] + ([] if isinstance(init, str) else [np.asarray(init, dtype=np.float64)])
        arrays += [] if prob.X_test is None else [prob.X_test, prob.Y_test]
        ckpt = TrainingCheckpoint(checkpoint, fingerprint(arrays, settings))
    resumed = ckpt.load() if ckpt is not None else None
    first_epoch, step = 1, 0
    if resumed is not None:
        saved, meta = resumed
        theta[:] = saved["theta"]
        S = np.ascontiguousarray(saved["S"])
        if reg.lam > 0:
            S_anchor = np.ascontiguousarray(saved["S_anchor"])
        for key, value in meta["history"].items():
            setattr(history, key, value)
        rng.bit_generator.state = meta["rng"]
        first_epoch, step = meta["epoch"] + 1, meta["step"]
        rec.t0 -= history.wall_time[-1]
        stag = history.stagnation
    else:
        total, per_edge, disagreement, state_norm = diagnose(S)
        rec.record(0, 0, theta, total, per_edge, state_norm)
        stag = history.stagnation
        stag.update(alpha=alpha, beta=beta, initial_disagreement=disagreement, B_omega=state_norm,
                    lambda_eff=None, bound=None, max_displacement=0.0, holds=None)
        if stagnation is True or (stagnation == "auto" and M * n_move <= _STAGNATION_MAX_SIZE):
            stag["lambda_eff"] = effective_spectral_gap(net, X, to_rows(S), layout)

    def save_checkpoint(epoch):
        ckpt.save({"theta": theta, "S": S, "S_anchor": S_anchor},
                  {"epoch": epoch, "step": step, "rng": rng.bit_generator.state,
                   "history": dataclasses.asdict(history)})

    n_epochs = -(-steps // epoch_steps)
    bar = _progress(n_epochs, progress, "sheaf training")
    bar.update(first_epoch - 1)
    limit = blas_limit(blas_threads)
    try:
        for epoch in range(first_epoch, n_epochs + 1):
            n = min(epoch_steps, steps - step)
            if epoch > 1 and not warm_start:
                S = start_state(restart)
                if reg.anchor == "initial" and reg.lam > 0:
                    S_anchor = S.copy()
            theta_prev, S_prev = theta.copy(), S.copy()
            done = train_steps(Xc, S, theta, *kern, alpha, beta, dt, n, n_move,
                               reg.code("lam"), reg.lam, reg.l1_ratio, S_anchor,
                               reg.code("mu"), reg.mu, reg.l1_ratio, theta_anchor,
                               F, E, phi_buf, work, grad)
            step += done
            finite = done == n and np.all(np.isfinite(theta)) and np.all(np.isfinite(S[:n_move]))
            if finite and (epoch % record_every == 0 or epoch == n_epochs):
                total, per_edge, _, state_norm = diagnose(S)
                tr = rec.record(epoch, step, theta, total, per_edge, state_norm)
                stag["B_omega"] = max(stag["B_omega"], state_norm)
                finite = np.isfinite(tr) and np.isfinite(total)
                if not finite:
                    _drop_last(history)
            if not finite:
                theta[:], S = theta_prev, S_prev
                stop_diverged(history, epoch, step)
                break
            bar.update(1)
            bar.set_postfix(loss=f"{history.train_loss[-1]:.4g}", refresh=False)
            if callback is not None and step % callback_every == 0:
                callback(TrainingInfo("sheaf", epoch, step, rec.network(theta), X, to_rows(S), history, layout))
            if ckpt is not None and (epoch % checkpoint_every == 0 or epoch == n_epochs):
                save_checkpoint(epoch)
    finally:
        limit.__exit__(None, None, None)
        bar.close()
    stag["max_displacement"] = max(history.weight_displacement)
    if stag["lambda_eff"]:
        stag["bound"] = beta * stag["B_omega"] * stag["initial_disagreement"] / (alpha * stag["lambda_eff"])
        stag["holds"] = bool(stag["max_displacement"] <= stag["bound"])
    return TrainResult(rec.network(theta), history, to_rows(S), layout)


def _check_threads(threads):
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, (int, np.integer))
                                or threads < 1):
        raise ValueError(f"blas_threads must be None or a positive integer, got {threads!r}")
    return threads


def blas_limit(threads):
    """Context manager limiting BLAS threads (``None``: leave as is).

    The compiled loops call BLAS once per large layer product per step; on a
    shared 2-core machine several BLAS threads per process fight for the
    cores and run several times slower than one thread.
    """
    import contextlib

    if _check_threads(threads) is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(int(threads), user_api="blas")


def _drop_last(history):
    for key in history.keys():
        getattr(history, key).pop()


def _progress(total, enabled, desc):
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not enabled, desc=desc, unit="epoch", leave=False)
