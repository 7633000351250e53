"""Pinned discord: how a network's error distributes backward when its output is pinned to the truth.

Any network (sheaf-trained, SGD-trained, imported) is embedded as a sheaf,
its output stalk is hard-pinned to the labels, and the heat equation's
equilibrium is found exactly from the forward pass (paper section 6.3 and
appendix E): :func:`~sheaflinalg.complete` solves the pinned system for an
activation pattern and updates the pattern until it is consistent.  For an
identity output the reduced sheaf is used and ``z(k+1)`` is the pinned stalk
(edges ``W1, R1, W2, ...``); for sigmoid, tanh and softmax outputs ``yhat``
is pinned (edges ``..., W(k+1), out``).

An equilibrium may sit on a switching surface ``z_j = 0``: below it the
weight edge pushes ``z_j`` up (``q_j = (W a + b)_j > 0``), above it the
weight and activation edges together push it down (``q_j + a_j < 0``).  The
pattern updates then cycle; the Filippov equilibrium keeps ``z_j = 0`` and
is found by pinning those coordinates at 0.  Such samples are settled and
their coordinates are listed in :attr:`PinnedDiscord.sliding`.
"""

from dataclasses import dataclass, field

import numpy as np

from ..._common.validation import as_float64, as_samples, check_bool, check_int
from ...network.model import check_network
from ...sheaf.pins.completion import complete
from ..edge_residuals import EdgeResiduals, residuals
from .graph import pinned_equilibrium
from ...sheaf.matrix_free.switching import ROUNDING, node_values, ties_at
from ..node_residuals import NodeResiduals, node_table
from ...network.paths import GRAPH, engine


@dataclass
class PinnedDiscord:
    """Result of :func:`pinned`.

    Attributes
    ----------
    state : ndarray, shape (n_samples, n_free)
        Equilibrium free cochain in :attr:`layout`'s order (pinned stalk included).
    layout : Layout
    by_edge : ndarray, shape (n_samples, n_edges)
        Discord ``1/2 ||residual||^2`` per sample and edge (the package's convention, whose
        gradient is the heat equation's force; the paper's tables report ``||residual||^2``,
        see :meth:`summary`).
    edge_names : list of str
    residuals : EdgeResiduals or NodeResiduals
        Per-coordinate residuals, active/inactive (:mod:`sheaflinalg.discord.edge_residuals`); a graph
        network's per node and channel, split by every pattern node
        (:mod:`sheaflinalg.discord.node_residuals`).
    settled : ndarray of bool, shape (n_samples,)
        The sample reached a consistent equilibrium (possibly on a switching surface); False means that no
        equilibrium was found within ``max_iter`` (:attr:`outcome` ``"unsettled"``).
    sliding : list of list of tuple
        Per sample, the ``(layer, neuron)`` coordinates held on the switching surface ``z = 0``
        (a graph network's: ``(node, coordinate)`` of the parents of ``relu``/``leaky_relu`` nodes, and
        ``(node, i, j)``: entries ``i`` and ``j`` of a max-pool's parent ``node`` held equal).
    damped : ndarray of int, shape (n_samples,)
        Per sample, the Gauss-Newton or Newton steps shortened by the line search (graphs with smooth
        nodes; zero otherwise).
    ties : ndarray of int, shape (n_samples,)
        Per sample, the switching surfaces the equilibrium is on (pre-activations of ReLUs zero to rounding,
        max-pool windows with tied largest entries), held ones included (see :attr:`outcome`).
    """

    state: np.ndarray
    layout: object
    by_edge: np.ndarray
    edge_names: list
    residuals: EdgeResiduals
    settled: np.ndarray
    sliding: list = field(default_factory=list)
    damped: np.ndarray = None
    ties: np.ndarray = None

    @property
    def outcome(self):
        """Per sample, what was found (an array of str):

        - ``"settled"``: an equilibrium off every switching surface (its pattern agrees with its solution);
        - ``"decided"``: an equilibrium on a switching surface (a ReLU's pre-activation exactly 0, a max-pool
          window's entries tied) where the side read off the state (``z >= 0`` active, the first maximum) is
          at rest: either side gives the same equilibrium, nothing is held;
        - ``"sliding"``: a Filippov equilibrium: coordinates held on a switching surface where both sides
          push into it (:attr:`sliding`: ReLU pre-activations held at 0, max-pool entries held equal);
        - ``"unsettled"``: no equilibrium found within ``max_iter`` (the pattern iteration or the Filippov
          search did not end, or the damped (Gauss-)Newton iteration of smooth nodes had not come to rest);
          the state is the last iterate, and its discord is not the pinned one.

        Examples
        --------
        >>> import numpy as np, sheaflinalg as sl
        >>> net = sl.Network.random([2, 8, 1], seed=0)
        >>> X, Y = sl.tasks.paraboloid(4, seed=0)
        >>> sl.discord.pinned(net, X, Y).outcome.tolist()
        ['settled', 'sliding', 'settled', 'settled']
        """
        M = len(self.settled)
        ties = np.zeros(M, dtype=np.int64) if self.ties is None else self.ties
        held = np.array([bool(s) for s in self.sliding]) if self.sliding else np.zeros(M, dtype=bool)
        return np.where(~self.settled, "unsettled", np.where(held, "sliding", np.where(ties > 0, "decided", "settled")))

    @property
    def total(self):
        """Total discord per sample (``1/2 ||delta omega||^2``, the package's convention)."""
        return self.by_edge.sum(axis=1)

    def summary(self, convention="paper"):
        """``{edge: (mean, std)}`` over the samples, and ``"Total"``: (mean of the totals, their std).

        ``convention="paper"`` reports the paper's discord ``||residual||^2`` (twice
        :attr:`by_edge`), so the numbers compare with its pinned-discord table;
        ``"energy"`` reports :attr:`by_edge` itself, ``1/2 ||residual||^2``.  The
        standard deviation is the sample one (``n - 1``), as in the paper.
        """
        if convention not in ("paper", "energy"):
            raise ValueError(f"unknown convention {convention!r}; expected 'paper' or 'energy'")
        values = self.by_edge * (2.0 if convention == "paper" else 1.0)
        ddof = 1 if values.shape[0] > 1 else 0
        out = {name: (float(values[:, j].mean()), float(values[:, j].std(ddof=ddof)))
               for j, name in enumerate(self.edge_names)}
        total = values.sum(axis=1)
        out["Total"] = (float(total.mean()), float(total.std(ddof=ddof)))
        return out

    def table(self, digits=4, convention="paper"):
        """The paper's pinned-discord table: mean +- std per edge over the samples, and the total.

        By default in the paper's convention, discord ``||residual||^2`` (see :meth:`summary`).  A graph
        network's is per node: op, shape, mean discord, share of the total and the split of every pattern
        node (:func:`~sheaflinalg.discord.node_residuals.node_table`).
        """
        if isinstance(self.residuals, NodeResiduals):
            rows = node_table(self.residuals, digits, convention)
        else:
            head = "||r||^2" if convention == "paper" else "1/2 ||r||^2"
            rows = [f"{'Edge':<8}{'discord ' + head + ' (mean +- std)':>34}"]
            for name, (mean, std) in self.summary(convention).items():
                rows.append(f"{name:<8}{mean:>18.{digits}f} +- {std:.{digits}f}")
        outcome = self.outcome
        rows.append(f"{self.state.shape[0]} samples; {int(np.sum(outcome == 'settled'))} settled, "
                    f"{int(np.sum(outcome == 'decided'))} decided at a tie or zero, "
                    f"{int(np.sum(outcome == 'sliding'))} sliding (Filippov), "
                    f"{int(np.sum(outcome == 'unsettled'))} with no equilibrium found")
        return "\n".join(rows)


def _targets(net, Y, M):
    """Labels as ``(M, n_out)`` float64; integer class labels for a softmax output become one-hot."""
    n_out = net.n_outputs
    Y = np.asarray(Y)
    if net.output == "softmax" and Y.ndim == 1 and n_out > 1:
        if Y.dtype.kind not in "iu" or Y.shape[0] != M or Y.min() < 0 or Y.max() >= n_out:
            raise ValueError(f"Y: class labels must be {M} integers in [0, {n_out})")
        return np.eye(n_out)[Y]
    Y = as_float64(Y, "Y")
    if Y.ndim == 1 and n_out == 1:
        Y = Y[:, None]
    shape = net.graph.shapes[net.graph.output_node]
    if Y.ndim > 2 and Y.shape == (M, *shape):
        Y = Y.reshape(M, n_out)
    if Y.shape != (M, n_out):
        also = f" or ({M}, {', '.join(map(str, shape))})" if len(shape) > 1 else ""
        raise ValueError(f"Y has shape {Y.shape}; expected ({M}, {n_out}){also} (n_samples, outputs)")
    return Y


def pinned(net, X, Y, max_iter=100, backend="auto", progress=True):
    """Pin the output stalk to the labels ``Y`` and find the heat equation's equilibrium.

    Parameters
    ----------
    net : Network
    X : array_like, shape (n_samples, n_0)
    Y : array_like, shape (n_samples, n_out)
        Labels (1-D for one output; class indices for a softmax output).
    max_iter : int
        Largest number of pattern updates (see :func:`sheaflinalg.complete`).
    backend : {"auto", "cholmod", "superlu"}
        Sparse Cholesky backend.
    progress : bool
        Show a bar of the conjugate gradients that a graph network with many outputs is solved by
        (:mod:`~sheaflinalg.discord.pinning.schur`).

    Returns
    -------
    PinnedDiscord
        Its :attr:`~PinnedDiscord.outcome` tells per sample whether the equilibrium is off the switching
        surfaces, decided at a tie or zero, sliding (Filippov), or not found (``"unsettled"``: the last
        iterate is returned, and its discord is not the pinned one).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 8, 1], seed=0)
    >>> X, Y = sl.tasks.paraboloid(20, seed=0)
    >>> pd = sl.discord.pinned(net, X, Y)
    >>> pd.edge_names, bool(pd.settled.all())
    (['W1', 'R1', 'W2'], True)
    >>> bool(np.allclose(pd.by_edge.sum(axis=1), pd.total))
    True
    """
    check_network(net, graphs=True)
    X, _ = as_samples(X, net.n_inputs, input_shape=net.input_shape)
    Y = _targets(net, Y, X.shape[0])
    progress = check_bool(progress, "progress")
    max_iter = check_int(max_iter, "max_iter", 1)
    state, layout, settled, sliding, damped = pinned_equilibrium(net, X, Y, max_iter, backend, progress) \
        if engine(net) == GRAPH else _chain_equilibrium(net, X, Y, max_iter, backend)
    res = residuals(net, X, state, layout)
    return PinnedDiscord(state=state, layout=layout, by_edge=res.by_edge(), edge_names=res.edge_names,
                         residuals=res, settled=settled, sliding=sliding, damped=damped,
                         ties=_ties(net, X, state, layout))


def _ties(net, X, state, layout):
    """Per sample, the switching surfaces ``state`` is on (:func:`~sheaflinalg.sheaf.matrix_free.switching.ties_at`;
    a chain's: its pre-activations zero to rounding)."""
    if engine(net) == GRAPH:
        return ties_at(net.graph, X.reshape(X.shape[0], -1), node_values(net.graph, layout, state))
    z = [state[:, layout.free(layout.z(l))] for l in range(1, net.n_hidden + 1)]
    return sum(np.sum(np.abs(v) <= ROUNDING * np.maximum(1.0, np.abs(v).max(axis=1, keepdims=True)), axis=1)
               for v in z)


def _chain_equilibrium(net, X, Y, max_iter, backend):
    """``(state, layout, settled, sliding, damped)`` of a chain's output pinned to ``Y`` (validated arrays;
    ``damped`` zeros: a chain has no smooth nodes)."""
    output = net.chain.names[-1] if net.output == "identity" else "yhat"
    c = complete(net, X, pins={output: Y}, max_iter=max_iter, backend=backend)
    state, settled = c.state.copy(), c.settled_samples.copy()
    sliding = [[] for _ in range(X.shape[0])]
    for s in np.flatnonzero(~settled):
        found = _on_switching_surface(net, X[s], Y[s], output, c.pattern, s, max_iter, backend)
        if found is not None:
            state[s], sliding[s] = found
            settled[s] = True
    return state, c.layout, settled, sliding, np.zeros(X.shape[0], dtype=np.int64)


def _on_switching_surface(net, x, y, output, pattern, s, max_iter, backend):
    """``(state, [(layer, neuron), ...])`` of a Filippov equilibrium of sample ``s``, or None.

    Frozen-pattern solves from the sample's last pattern: a pattern that comes
    back (a cycle) pins the coordinates that flip in it at ``z = 0``; a
    consistent solution is accepted when both sides push into the surface at
    every pinned coordinate, and a pinned coordinate that fails the condition
    is released to the side it is pushed to.
    """
    x, y = x[None, :], y[None, :]
    pat = [m[s:s + 1].copy() for m in pattern]
    surface, seen = set(), set()
    for _ in range(max_iter):
        c = complete(net, x, pins=_surface_pins(net, output, y, surface), pattern=pat, backend=backend)
        flips = {(l, int(j)) for l in range(1, net.n_hidden + 1)
                 for j in np.flatnonzero((c.block(c.layout.z(l))[0] >= 0) != pat[l - 1][0])} - surface
        if not flips:
            released = _release(net, x[0], c, surface, pat)
            if not released:
                return c.state[0], sorted(surface)
            surface -= released
            continue
        key = (b"".join(np.packbits(m).tobytes() for m in pat), frozenset(surface))
        if key in seen:
            surface |= flips            # the pattern cycles: the flipping coordinates slide
            continue
        seen.add(key)
        for l, j in flips:
            pat[l - 1][0, j] = not pat[l - 1][0, j]
    return None


def _surface_pins(net, output, y, surface):
    """The pins of :func:`~sheaflinalg.complete`: the output, and ``z_j = 0`` on ``surface``."""
    pins = {output: y}
    for l in sorted({l for l, _ in surface}):
        idx = sorted(j for m, j in surface if m == l)
        pins[f"{net.chain.names[2 * l - 2]}[{','.join(map(str, idx))}]"] = np.zeros((1, len(idx)))
    return pins


def _release(net, x, completion, surface, pat):
    """Pinned coordinates where Filippov's condition fails, set in ``pat`` to the side they are pushed to.

    At ``z_j = 0`` the weight edge pushes with ``q_j = (W a + b)_j`` below the
    surface and with ``q_j + a_j`` above it; the coordinate slides when
    ``q_j >= 0`` and ``q_j + a_j <= 0``.
    """
    released = set()
    a_prev = x
    for l in range(1, net.n_hidden + 1):
        q = net.weights[l - 1] @ a_prev + net.biases[l - 1]
        a = completion.block(completion.layout.a(l))[0]
        for m, j in surface:
            if m == l and not (q[j] >= 0.0 and q[j] + a[j] <= 0.0):
                released.add((m, j))
                pat[l - 1][0, j] = q[j] + a[j] > 0.0
        a_prev = a
    return released
