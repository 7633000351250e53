"""Training history, the per-epoch callback record, regularisation options and divergence handling."""

import dataclasses
import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from .._common.validation import check_real

from ..kernels.training import REG_CODES
from ..network.model import Network, NetworkOverflowError
from .losses import accuracy, loss_value


class DivergenceWarning(RuntimeWarning):
    """Training stopped because the weights, the state or the loss stopped being finite."""


@dataclass
class Regularization:
    """Regularisation of eq. (regularized-general-dynamics): reluctance edges on the state and the weights.

    Parameters
    ----------
    lam : float
        Strength on the free cochain (``lambda``): force ``-lam (omega - omega_0)``.
    mu : float
        Strength on the trainable maps (``mu``): force ``-mu (theta - theta_0)``.
    kind : {"l2", "l1", "elastic"}
        Potential of the reluctance edges: ``1/2 d^2``, ``|d|``, or the elastic
        net ``l1_ratio |d| + (1 - l1_ratio) d^2 / 2``.
    l1_ratio : float
        Weight of the L1 part of the elastic net, in ``[0, 1]``.
    anchor : {"zero", "initial"}
        Reference point: zero, or the initial condition (the initial weights,
        and the state each relaxation started from).

    Examples
    --------
    >>> Regularization(lam=1e-3, mu=1e-4, kind="elastic").kind
    'elastic'
    """

    lam: float = 0.0
    mu: float = 0.0
    kind: str = "l2"
    l1_ratio: float = 0.5
    anchor: str = "zero"

    def __post_init__(self):
        for name in ("lam", "mu"):
            v = check_real(getattr(self, name), name)
            if not np.isfinite(v) or v < 0:
                raise ValueError(f"regularisation strength {name} must be a finite number >= 0, got {v!r}")
        if self.kind not in ("l2", "l1", "elastic"):
            raise ValueError(f"unknown regularisation kind {self.kind!r}; expected 'l2', 'l1' or 'elastic'")
        if not 0.0 <= check_real(self.l1_ratio, "l1_ratio") <= 1.0:
            raise ValueError(f"l1_ratio must lie in [0, 1], got {self.l1_ratio!r}")
        if self.anchor not in ("zero", "initial"):
            raise ValueError(f"unknown regularisation anchor {self.anchor!r}; expected 'zero' or 'initial'")

    @classmethod
    def coerce(cls, reg):
        """``None`` -> no regularisation; a dict -> keyword arguments; a Regularization as is."""
        if reg is None:
            return cls()
        if isinstance(reg, cls):
            return reg
        if isinstance(reg, dict):
            unknown = set(reg) - {"lam", "mu", "kind", "l1_ratio", "anchor"}
            if unknown:
                raise ValueError(f"unknown regularisation options {sorted(unknown)}; "
                                 f"expected lam, mu, kind, l1_ratio, anchor")
            return cls(**reg)
        raise TypeError(f"reg must be None, a dict or a Regularization, got {type(reg).__name__}")

    def code(self, which):
        """Kernel code of the state (``"lam"``) or weight (``"mu"``) regulariser (0 when off)."""
        return REG_CODES[self.kind] if getattr(self, which) > 0 else 0


@dataclass
class TrainingInfo:
    """What a training callback receives after an epoch.

    Attributes
    ----------
    method : {"sheaf", "equilibrium", "sgd"}
    epoch : int
        Epochs done (1-based after the first epoch).
    step : int
        Euler steps (sheaf), optimiser steps (equilibrium: mini-batches) or
        gradient-descent epochs (SGD) done.
    network : Network
        A copy of the current weights.
    X : ndarray
        Training inputs, rows are samples.
    state : ndarray or None
        Current free cochain, ``(n_samples, n_free)`` in ``layout``'s order
        (the ``yhat`` block holds the targets); None for SGD and equilibrium
        training (whose equilibria are per mini-batch).
    history : History
        The history recorded so far.
    layout : Layout or None
        Layout of ``state`` (None without a state).
    """

    method: str
    epoch: int
    step: int
    network: object
    X: np.ndarray
    state: object
    history: object
    layout: object = None


@dataclass
class History:
    """Per-record history of a training run (one record before training, then every ``record_every`` epochs).

    List attributes (one entry per record): ``epoch``, ``step``, ``train_loss``,
    ``test_loss`` (forward-pass losses, the paper's reported metric),
    ``train_accuracy``/``test_accuracy`` (classifiers, else None),
    ``discord`` (total discord of the training state; method "sheaf" only),
    ``discord_by_edge`` (one row per record, columns ``edge_names``),
    ``weight_norms`` (Frobenius norm of each extended weight ``[W_l b_l]``),
    ``weight_displacement`` (``||theta - theta_0||``), ``state_norm``
    (Frobenius norm of the extended cochain), ``wall_time`` (seconds since the
    start); equilibrium training (method ``"equilibrium"``) records how its
    mini-batch equilibria settled over the epoch that ends at the record:
    ``settle_iterations`` (the most pattern iterations any batch took),
    ``unsettled`` (samples whose pattern had not settled within the cap, summed
    over the batches), ``sliding`` (coordinates held on a switching surface,
    summed) and ``decided`` (max-pool ties and exact zeros of the forward pass
    decided in the batch by the sign of the response, summed; None in
    checkpoints written before it was recorded), None at the record before training and for the other methods.  ``stagnation`` holds the ingredients of the structural
    stagnation bound (section 5.3, sheaf runs): ``alpha``, ``beta``,
    ``initial_disagreement`` ``||delta_0 omega_0||``, ``B_omega`` (largest
    extended-cochain norm seen at the records), ``lambda_eff`` (smallest
    eigenvalue of the training Laplacian at the start), ``bound``
    ``beta B_omega ||delta_0 omega_0|| / (alpha lambda_eff)``,
    ``max_displacement`` (largest ``||theta - theta_0||`` recorded) and
    ``holds``; ``diverged``/``message`` tell whether and
    why a run stopped early.  ``history["train_loss"]`` returns a NumPy array.
    """

    method: str
    loss: str
    edge_names: list = field(default_factory=list)
    epoch: list = field(default_factory=list)
    step: list = field(default_factory=list)
    train_loss: list = field(default_factory=list)
    test_loss: list = field(default_factory=list)
    train_accuracy: list = field(default_factory=list)
    test_accuracy: list = field(default_factory=list)
    discord: list = field(default_factory=list)
    discord_by_edge: list = field(default_factory=list)
    weight_norms: list = field(default_factory=list)
    weight_displacement: list = field(default_factory=list)
    state_norm: list = field(default_factory=list)
    wall_time: list = field(default_factory=list)
    settle_iterations: list = field(default_factory=list)
    unsettled: list = field(default_factory=list)
    sliding: list = field(default_factory=list)
    decided: list = field(default_factory=list)
    stagnation: dict = field(default_factory=dict)
    diverged: bool = False
    message: str = ""

    def __getitem__(self, key):
        value = getattr(self, key)
        if isinstance(value, list):
            if any(v is None for v in value):
                return np.array([np.nan if v is None else v for v in value], dtype=np.float64)
            return np.asarray(value, dtype=np.float64)
        return value

    def __len__(self):
        return len(self.epoch)

    def keys(self):
        """Names of the per-record series."""
        return ["epoch", "step", "train_loss", "test_loss", "train_accuracy", "test_accuracy", "discord",
                "discord_by_edge", "weight_norms", "weight_displacement", "state_norm", "wall_time",
                "settle_iterations", "unsettled", "sliding", "decided"]

    def drop_last(self):
        """Remove the last record from every series (a record that turned out non-finite)."""
        for key in self.keys():
            getattr(self, key).pop()

    @classmethod
    def restore(cls, data, like, epochs, steps, n_layers, alpha, beta):
        """The history saved in a checkpoint (``dataclasses.asdict`` of one), checked against the run.

        Parameters
        ----------
        data : dict
            The saved history.
        like : History
            The run's own (empty) history: ``method``, ``loss`` and ``edge_names`` must match.
        epochs, steps : list of int
            The records the run has made by the checkpoint's epoch.
        n_layers : int
            Number of weight matrices (entries of ``weight_norms``).
        alpha, beta : float or None
            The run's rates (recorded in ``stagnation``; method "sheaf" only).

        Raises
        ------
        ValueError
            Naming the field: a missing or unknown field, a series whose length
            or entries do not fit, counters other than the run's records.
        """
        names = [f.name for f in dataclasses.fields(cls)]
        if isinstance(data, dict) and "decided" not in data and isinstance(data.get("epoch"), list):
            data = dict(data, decided=[None] * len(data["epoch"]))     # written before it was recorded
        if not isinstance(data, dict) or set(data) != set(names):
            got = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise ValueError(f"must have exactly the fields {sorted(names)}, got {got}")
        for name in ("method", "loss", "edge_names"):
            if data[name] != getattr(like, name):
                raise ValueError(f"{name} must be {getattr(like, name)!r} (the run's), got {data[name]!r}")
        if data["epoch"] != epochs or data["step"] != steps:
            raise ValueError(f"epoch and step must be the run's records {epochs} and {steps}, got "
                             f"{data['epoch']!r} and {data['step']!r}")
        for name, ok in _record_rules(like, n_layers).items():
            series = data[name]
            if not isinstance(series, list) or len(series) != len(epochs):
                raise ValueError(f"{name} must be a list of {len(epochs)} records (one per epoch record), "
                                 f"got {_describe(series)}")
            bad = [i for i, v in enumerate(series) if not ok(v)]
            if bad:
                raise ValueError(f"{name} has an invalid record {series[bad[0]]!r} at position {bad[0]}")
        if like.method == "sheaf":
            _check_stagnation(data["stagnation"], alpha, beta)
        elif data["stagnation"] != {}:
            raise ValueError(f"stagnation must be empty for method {like.method!r}, got {data['stagnation']!r}")
        if data["diverged"] is not False or data["message"] != "":
            raise ValueError("diverged must be false and message empty (a checkpoint is written only after "
                             "finite epochs)")
        return cls(**{name: data[name] for name in names})

    def last_finite_loss(self):
        """The last finite training loss recorded (None if there is none)."""
        for v in reversed(self.train_loss):
            if v is not None and np.isfinite(v):
                return v
        return None


class Recorder:
    """Shared bookkeeping of :func:`~sheaflinalg.train` and :func:`~sheaflinalg.sgd`: losses, norms, time.

    ``params`` is the :class:`~sheaflinalg.training.velocity.GraphParameters` of a graph
    network (None for a chain): it turns the flat ``theta`` into a network and its norms (one per
    node with parameters).
    """

    def __init__(self, history, net, X, Y, X_test, Y_test, loss, loss_param, theta0, params=None):
        self.history = history
        self.net = net
        self.params = params
        self.X, self.Y, self.X_test, self.Y_test = X, Y, X_test, Y_test
        self.loss, self.loss_param = loss, loss_param
        self.theta0 = theta0.copy()
        self.t0 = time.perf_counter()

    def network(self, theta):
        if self.params is not None:
            return Network.from_graph(self.params.graph(theta))
        return self.net.with_parameters(theta)

    def weight_norms(self, net, theta):
        """Frobenius norm of every extended weight ``[W_l b_l]`` (a graph: of every node's parameters)."""
        if self.params is not None:
            return self.params.norms(theta)
        return [float(np.sqrt(np.sum(W * W) + np.sum(b * b))) for W, b in zip(net.weights, net.biases)]

    def losses(self, net):
        """Train and test forward-pass losses and accuracies (test entries None without test data)."""
        out = net.output
        with np.errstate(over="ignore", invalid="ignore"):
            P = _outputs(net, self.X)
            tr = loss_value(P, self.Y, self.loss, self.loss_param, out)
            acc = accuracy(P, self.Y, out)
            te = te_acc = None
            if self.X_test is not None:
                Pt = _outputs(net, self.X_test)
                te = loss_value(Pt, self.Y_test, self.loss, self.loss_param, out)
                te_acc = accuracy(Pt, self.Y_test, out)
        return tr, te, acc, te_acc

    def record(self, epoch, step, theta, discord=None, by_edge=None, state_norm=None, settle=(None,) * 4):
        """Append one record (``settle``: iterations, unsettled, sliding, decided); returns the training loss (may be
        non-finite)."""
        h = self.history
        net = self.network(theta)
        tr, te, acc, te_acc = self.losses(net)
        h.epoch.append(int(epoch))
        h.step.append(int(step))
        h.train_loss.append(tr)
        h.test_loss.append(te)
        h.train_accuracy.append(acc)
        h.test_accuracy.append(te_acc)
        h.discord.append(discord)
        h.discord_by_edge.append(None if by_edge is None else [float(v) for v in by_edge])
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging run records inf, no warning
            h.weight_norms.append(self.weight_norms(net, theta))
            h.weight_displacement.append(float(np.linalg.norm(theta - self.theta0)))
        h.state_norm.append(state_norm)
        h.wall_time.append(time.perf_counter() - self.t0)
        for series, value in zip((h.settle_iterations, h.unsettled, h.sliding, h.decided), settle, strict=True):
            series.append(value)
        return tr


def _record_rules(like, n_layers):
    """``{series: check of one record}`` for a history of ``like``'s method (the joint dynamics record the
    state's discord, equilibrium training how its equilibria settled)."""
    n_edges = len(like.edge_names)
    rules = {"train_loss": _finite, "test_loss": _number_or_none, "train_accuracy": _number_or_none,
             "test_accuracy": _number_or_none, "weight_displacement": _finite, "wall_time": _finite,
             "weight_norms": lambda v: isinstance(v, list) and len(v) == n_layers and all(map(_finite, v))}
    state = {"discord": _finite, "state_norm": _finite,
             "discord_by_edge": lambda v: isinstance(v, list) and len(v) == n_edges and all(map(_finite, v))}
    settle = {name: _count_or_none for name in ("settle_iterations", "unsettled", "sliding", "decided")}
    if like.method == "sheaf":
        return dict(rules, **state, **{name: _none for name in settle})
    return dict(rules, **settle, **{name: _none for name in state})


def _none(v):
    return v is None


def _count_or_none(v):
    return v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0)


def _finite(v):
    return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and math.isfinite(v))


def _number_or_none(v):
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))


def _describe(value):
    return f"a list of {len(value)}" if isinstance(value, list) else type(value).__name__


_STAGNATION = {"alpha", "beta", "initial_disagreement", "B_omega", "lambda_eff", "bound", "max_displacement",
               "holds"}


def _check_stagnation(stag, alpha, beta):
    """The stagnation-bound ingredients saved mid-run (the bound itself is closed at the end)."""
    if not isinstance(stag, dict) or set(stag) != _STAGNATION:
        raise ValueError(f"stagnation must have exactly the fields {sorted(_STAGNATION)}, got "
                         f"{sorted(stag) if isinstance(stag, dict) else type(stag).__name__}")
    if stag["alpha"] != alpha or stag["beta"] != beta:
        raise ValueError(f"stagnation alpha and beta must be the run's {alpha!r} and {beta!r}, got "
                         f"{stag['alpha']!r} and {stag['beta']!r}")
    for name in ("initial_disagreement", "B_omega", "max_displacement"):
        if not _finite(stag[name]) or stag[name] < 0:
            raise ValueError(f"stagnation {name} must be a finite number >= 0, got {stag[name]!r}")
    for name in ("lambda_eff", "bound"):
        if stag[name] is not None and not _finite(stag[name]):
            raise ValueError(f"stagnation {name} must be a finite number or null, got {stag[name]!r}")
    if not (stag["holds"] is None or isinstance(stag["holds"], bool)):
        raise ValueError(f"stagnation holds must be true, false or null, got {stag['holds']!r}")


def _outputs(net, X):
    """The forward pass, NaN where it overflows: a diverging run is detected by its non-finite loss."""
    try:
        return net.forward(X)
    except NetworkOverflowError:
        return np.full((X.shape[0], net.n_outputs), np.nan)


def stop_diverged(history, epoch, step):
    """Mark ``history`` as diverged and warn with the epoch and the last finite loss."""
    last = history.last_finite_loss()
    history.diverged = True
    history.message = (f"training diverged during epoch {epoch} (by step {step}): the weights, the state or the "
                       f"loss stopped being finite; last finite training loss {last!r}; returning the weights "
                       f"of the last finite epoch")
    warnings.warn(history.message, DivergenceWarning, stacklevel=3)
