"""What every method of :func:`~sheaflinalg.dynamics.heat.heat` starts from: :class:`HeatProblem`.

The options shared by the methods (rate, tolerance, initial state, pins, soft
pins, reluctance, reduced system, threads) are validated here, then resolved
once into the layout, the pins and the initial free cochain.
"""

from dataclasses import dataclass

import numpy as np

from .._common.threads import resolve_threads
from .._common.validation import check_bool, check_optional_int, check_positive, check_seed, check_tol
from ..network.model import check_network
from ..sheaf.pins import specs as _pins
from ..network.graph.forward import evaluate
from ..sheaf.matrix_free.bound import graph_lambda_max_bound, spectral_norm, unbounded_nodes
from ..sheaf.layout import Layout
from ..sheaf.skip_edges.encoding import DEFAULT_SKIP_ENCODING, check_skip_encoding
from ..sheaf.state import initial_state
from ..network.paths import GRAPH, engine


def lambda_max_bound(net, gamma_max=0.0, reluctance=0.0, state=None, skip_encoding=DEFAULT_SKIP_ENCODING):
    """Upper bound on ``lambda_max(L[Omega, Omega])`` valid for every activation pattern.

    ``delta_Omega = I - N`` where ``N`` holds one block per block row and per
    block column (``R_l``, ``W_{l+1}`` for ``l >= 1``, and the output Jacobian
    ``J``), so ``||N||_2`` is the largest block norm and

    ``lambda_max <= (1 + max(1, ||W_2||_2, ..., ||W_{k+1}||_2))^2 + max gamma + lambda``

    (``||R|| <= 1``; ``||J|| <= 1`` for sigmoid, tanh and softmax; hard pins
    take principal submatrices, which only lowers ``lambda_max``; soft pins
    and reluctance add at most ``gamma + lambda`` on the diagonal).  For a
    nonlinear output it bounds the linearised (Gauss-Newton) operator; the
    output curvature term ``phi''(z) (phi(z) - yhat)`` is not included.

    On a graph network (:attr:`Network.is_graph`) the bound is
    ``||I + (n_vu)||_2^2 + max gamma + lambda`` with ``n_vu`` a bound on the
    norm of every restriction map over every pattern
    (:func:`sheaflinalg.sheaf.matrix_free.bound.graph_lambda_max_bound`).  A product of two values
    (``mul``, ``matmul``) has no bound over every state: it is read at ``state`` (``{node: rows}``,
    the input ``x`` included), and without one the bound is ``inf``.  Under ``skip_encoding="edges"``
    an ``add`` or ``concat`` node has one block row per parent (a chain has none: the same bound).

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> net = sl.Network.random([2, 4, 1], seed=0)
    >>> lambda_max_bound(net) >= 4.0
    True
    """
    check_network(net, graphs=True)
    gamma_max, reluctance = check_tol(gamma_max, "gamma_max"), check_tol(reluctance, "reluctance")  # finite, >= 0
    if engine(net) == GRAPH:
        return graph_lambda_max_bound(net.graph, gamma_max, reluctance, state, check_skip_encoding(skip_encoding))
    m = 1.0
    for W in net.weights[1:]:
        m = max(m, spectral_norm(W))
    return (1.0 + m) ** 2 + gamma_max + reluctance


@dataclass(frozen=True)
class SharedSettings:
    """The options every method uses, validated (see :func:`sheaflinalg.heat` for their meaning)."""

    alpha: float
    tol: float
    init: object
    seed: object
    threads: int
    progress: bool
    skip_encoding: str = DEFAULT_SKIP_ENCODING

    @classmethod
    def validated(cls, alpha, tol, init, seed, threads, progress, skip_encoding=DEFAULT_SKIP_ENCODING):
        check_seed(seed)
        return cls(alpha=check_positive(alpha, "alpha"), tol=check_tol(tol, "tol"), init=init, seed=seed,
                   threads=resolve_threads(check_optional_int(threads, "threads")),
                   progress=check_bool(progress, "progress"), skip_encoding=check_skip_encoding(skip_encoding))


@dataclass
class HeatProblem:
    """A heat run's inputs, resolved: samples, layout, pins, initial state, the bound on ``lambda_max``.

    Attributes
    ----------
    net : Network
    X : ndarray, shape (n_samples, n_0)
    layout : Layout
    hard : resolved hard pins (``index``, ``values``, ``labels``)
    soft : resolved soft pins (``index``, ``values``, ``gamma``, ``labels``, ``size``)
    lam : float
        Reluctance strength (0: none); ``anchor`` its anchor (rows) or None.
    S0 : ndarray, shape (n_free, n_samples)
        Initial free cochain, samples in columns, hard pins set.
    bound : float
        :func:`lambda_max_bound` of the network with its soft pins and reluctance; with products of two
        values (``unbounded``), at the initial state and the forward pass (:func:`start_states`).
    settings : SharedSettings
    unbounded : tuple of str
        The nodes without a bound over every state (products of two values), whose bound is read at
        those states: ``bound`` holds there, not over the whole run.
    """

    net: object
    X: np.ndarray
    layout: Layout
    hard: object
    soft: object
    lam: float
    anchor: object
    S0: np.ndarray
    bound: float
    settings: SharedSettings
    unbounded: tuple = ()

    @property
    def n_samples(self):
        return int(self.X.shape[0])


def check_reduced(net, reduced, pins, soft_pins):
    """``reduced`` resolved: the default is the reduced system for identity output without output pins."""
    if reduced is None:
        return _pins.default_reduced(net, pins, soft_pins)
    if check_bool(reduced, "reduced") and net.output != "identity":
        raise ValueError(f"reduced=True needs identity output (this network has {net.output!r})")
    return reduced


def prepare(net, X, settings, pins, soft_pins, reluctance, reduced):
    """The :class:`HeatProblem` of validated ``settings`` (``X`` as returned by ``as_samples``)."""
    edges = settings.skip_encoding == "edges" and engine(net) == GRAPH
    layout = Layout.from_graph(net.graph, reduced, "edges") if edges else Layout.for_network(net, reduced=reduced)
    resolved = _pins.resolve_pins(net, X, layout, pins, soft_pins, reluctance)
    lay, hard, soft, lam, anchor = resolved.layout, resolved.hard, resolved.soft, resolved.lam, resolved.anchor
    net.forward(X)          # refuses a network whose forward pass overflows, naming the node (a chain: the layer)
    # Copy: for one free row or one sample the columns view can alias the caller's init array.
    S0 = np.array(initial_state(net, X, lay, settings.init, settings.seed), dtype=np.float64, order="C", copy=True)
    S0[hard.index] = hard.values.T
    unbounded = tuple(unbounded_nodes(net.graph)) if engine(net) == GRAPH else ()
    state = start_states(net, X, lay, S0) if unbounded else None
    bound = lambda_max_bound(net, soft.gamma.max() if soft.size else 0.0, lam, state, settings.skip_encoding)
    if not np.isfinite(bound):
        raise ValueError(f"the weights are too large: the bound on lambda_max(L[Omega,Omega]) overflows "
                         f"({bound}); no dt is stable")
    return HeatProblem(net=net, X=X, layout=lay, hard=hard, soft=soft, lam=lam, anchor=anchor, S0=S0, bound=bound,
                       settings=settings, unbounded=unbounded)


def start_states(net, X, lay, S0):
    """Every node's rows at the initial state ``S0`` and at the forward pass, samples stacked: where the maps of
    the products of two values are bounded (a bound there, not over a run that leaves them)."""
    forward = evaluate(net.graph, X).values
    start = {b.name: S0[b.slice].T for b in lay.free_blocks if b.name != "yhat"}
    return {name: np.concatenate([start.get(name, rows), rows]) for name, rows in forward.items()}

