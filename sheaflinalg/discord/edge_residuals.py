"""Per-coordinate edge residuals of any state: where discord sits, coordinate by coordinate.

For a free cochain (a heat run's state, a training state, a harmonic
extension, a completion), every weight edge ``e_z(l)`` has the residual
``(W_l a_(l-1) + b_l) - z_l`` (``a_0 = x``) and every activation edge
``e_a(l)`` the residual ``ReLU(z_l) - a_l``; an unreduced nonlinear output
adds ``phi(z_(k+1)) - yhat``.  They are the negated edge discrepancies of the
sheaf (``R z = ReLU(z)`` for the mask ``z >= 0``), so an edge's discord is
``1/2 ||residual||^2``.  Each coordinate is active when ``z_j >= 0``.
"""

from dataclasses import dataclass

import numpy as np

from .._common.validation import as_float64, as_samples, check_type
from ..network import activations
from ..network.model import check_network
from ..sheaf.layout import Layout
from .node_residuals import node_residuals
from ..network.paths import GRAPH, engine


def edge_name(label):
    """Short name of an edge block: ``e_z2`` -> ``W2``, ``e_a1`` -> ``R1``, ``e_y`` -> ``out``."""
    if label == "e_y":
        return "out"
    if label.startswith("e_z"):
        return "W" + label[3:]
    if label.startswith("e_a"):
        return "R" + label[3:]
    raise ValueError(f"unknown edge block label {label!r}")


@dataclass
class EdgeResiduals:
    """Residuals of every edge of a batch of states (see the module docstring).

    Attributes
    ----------
    edge_names : list of str
        ``W1, R1, W2, ..., W(k+1)[, out]`` in the layout's edge order; a chain of nodes named
        otherwise (:attr:`~sheaflinalg.sheaf.layout.Layout.paper` false): the node names ``[, yhat]``.
    values : list of ndarray
        Residuals per edge, ``(n_samples, edge size)`` each.
    z : list of ndarray
        The pre-activation each edge's coordinates belong to (``z_l`` for
        ``W_l`` and ``R_l``, ``z_(k+1)`` for ``out``), same shapes.
    layout : Layout
    """

    edge_names: list
    values: list
    z: list
    layout: Layout

    def __getitem__(self, name):
        return self.values[self._index(name)]

    def _index(self, name):
        if name not in self.edge_names:
            raise KeyError(f"no edge {name!r}; edges: {', '.join(self.edge_names)}")
        return self.edge_names.index(name)

    def active(self, name):
        """Mask ``z_j >= 0`` of the coordinates of edge ``name``, ``(n_samples, size)``."""
        return self.z[self._index(name)] >= 0

    def split(self, name):
        """``(active, inactive)`` residuals of edge ``name`` as flat arrays."""
        r, mask = self[name], self.active(name)
        return r[mask], r[~mask]

    def by_edge(self):
        """Discord ``1/2 ||residual||^2`` per sample and edge, ``(n_samples, n_edges)``."""
        return np.stack([0.5 * np.sum(r * r, axis=1) for r in self.values], axis=1)


def residuals(net, X, state, layout=None):
    """Edge residuals of the free cochains ``state`` of the inputs ``X``.

    Parameters
    ----------
    net : Network
        A chain or a graph network.
    X : array_like, shape (n_samples, n_0)
        (a graph network also takes ``(n_samples, *input_shape)``).
    state : array_like, shape (n_samples, n_free)
        Free coordinates in ``layout``'s order (``z1, a1, ..., z(k+1)[, yhat]``; a graph network's nodes in
        topological order ``[, yhat]``).
    layout : Layout, optional
        Default: the full layout when ``state`` has its size, else the reduced one.

    Returns
    -------
    EdgeResiduals, or NodeResiduals for a graph network
        (:mod:`sheaflinalg.discord.node_residuals`: per node, per channel, split by every pattern node).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 5, 1], seed=0)
    >>> X = np.random.default_rng(0).uniform(-2, 2, size=(4, 2))
    >>> r = residuals(net, X, sl.harmonic_extension(net, X).free)      # the forward pass: no discord
    >>> r.edge_names, float(np.abs(r.by_edge()).max())
    (['W1', 'R1', 'W2', 'out'], 0.0)
    """
    check_network(net, graphs=True)
    X, _ = as_samples(X, net.n_inputs, input_shape=net.input_shape)
    state = as_float64(state, "state")
    if state.ndim == 1:
        state = state[None, :]
    layout = _state_layout(net, state, layout)
    if state.shape != (X.shape[0], layout.n_free):
        raise ValueError(f"state has shape {state.shape}; expected ({X.shape[0]}, {layout.n_free}) "
                         f"(n_samples, free coordinates of {'the reduced' if layout.reduced else 'the'} layout)")
    if engine(net) == GRAPH:
        return node_residuals(net, X, state, layout)
    k = net.n_hidden
    names, values, zs = [], [], []
    a_prev = X
    for l in range(1, k + 2):
        z = state[:, layout.free(layout.z(l))]
        names.append(f"W{l}" if layout.paper else layout.z(l))
        values.append(a_prev @ net.weights[l - 1].T + net.biases[l - 1] - z)
        zs.append(z)
        if l <= k:
            a = state[:, layout.free(layout.a(l))]
            names.append(f"R{l}" if layout.paper else layout.a(l))
            values.append(np.maximum(z, 0.0) - a)
            zs.append(z)
            a_prev = a
    if not layout.reduced:
        names.append("out" if layout.paper else "yhat")
        values.append(activations.apply(net.output, z) - state[:, layout.free("yhat")])
        zs.append(z)
    return EdgeResiduals(names, values, zs, layout)


def _state_layout(net, state, layout):
    """``layout`` checked against ``net``, or the default one for a state of ``state``'s width."""
    if layout is None:
        full = Layout.for_network(net)
        return full if state.shape[-1] == full.n_free else Layout.for_network(net, reduced=True)
    check_type(layout, Layout, "layout", "a sheaflinalg.Layout (e.g. system.layout)")
    if engine(net) == GRAPH:
        if layout.graph is not net.graph:
            raise ValueError("layout is not the layout of this graph network; use Layout.for_network(net, reduced)")
    elif layout.is_graph or list(layout.dims) != list(net.dims):
        raise ValueError(f"layout is of a network with widths {layout.dims}, not {net.dims}")
    elif layout.names != net.chain.names:
        raise ValueError(f"layout names the nodes {list(layout.names)}, not {list(net.chain.names)}")
    return layout
