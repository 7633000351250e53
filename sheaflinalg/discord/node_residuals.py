"""Per-node edge residuals of a graph network's state: discord by node, by channel, and by pattern.

Every node ``v`` of a graph network has one defining edge; at a state ``w``
(every node's value, the input ``X`` at the boundary) its residual is the
prediction from the parents minus the value,
``sum over parents u of F_(u->v)(P) w_u + b_v - w_v``, with the pattern ``P``
read off the state itself (``z >= 0`` active, the first maximum of each
max-pool window), as for chains (:mod:`~sheaflinalg.discord.edge_residuals`:
the residual is the negated edge discrepancy, and the edge's discord is
``1/2 ||residual||^2``).  An unreduced layout adds the output edge, named
``"yhat"`` after the vertex it defines: ``phi(z_out) - yhat``.

A node's value has the shape of its feature map, channels first: the discord
of a channel is the sum over its positions (a flat node's channels are its
coordinates).  Pattern nodes split the residuals of an edge in two:

* ``relu`` and ``leaky_relu``: the active (``z_j >= 0``) and inactive
  coordinates, of the node's own edge or of its parent's (same size);
* ``maxpool``: the entries of the parent selected by some window's maximum
  and the unselected ones, of the parent's edge (an unselected entry gets no
  pull from the pool).
"""

from dataclasses import dataclass

import numpy as np

from .._common.validation import did_you_mean
from ..sheaf.graph_residuals import GraphSheaf, output_residual
from ..sheaf.layout import Layout

#: Name of the output edge (``yhat - phi(z_out)``) in :attr:`NodeResiduals.edge_names`.
OUTPUT_EDGE = "yhat"


@dataclass
class NodeResiduals:
    """Residuals of every node's defining edge of a batch of graph-network states (see the module docstring).

    Attributes
    ----------
    edge_names : list of str
        The nodes in topological order, then ``"yhat"`` (the output edge) unless the layout is reduced.
    values : list of ndarray
        Residuals per edge, ``(n_samples, size)`` each.
    pattern : dict
        ``{node: rows}`` read off the state: bool masks (``relu``, ``leaky_relu``) and int64 argmax positions in
        the parent's stalk (``maxpool``).
    layout : Layout
    """

    edge_names: list
    values: list
    pattern: dict
    layout: Layout

    @property
    def graph(self):
        return self.layout.graph

    def _index(self, name):
        if name not in self.edge_names:
            raise KeyError(f"no node {name!r}; {did_you_mean(name, self.edge_names)}")
        return self.edge_names.index(name)

    def __getitem__(self, name):
        return self.values[self._index(name)]

    def shape(self, name):
        """Per-sample shape of node ``name``'s value (``"yhat"``: the output node's)."""
        self._index(name)
        return self.graph.shapes[self.graph.output_node if name == OUTPUT_EDGE else name]

    def by_edge(self):
        """Discord ``1/2 ||residual||^2`` per sample and edge, ``(n_samples, n_edges)`` (columns: :attr:`edge_names`)."""
        return np.stack([0.5 * np.einsum("ij,ij->i", r, r) for r in self.values], axis=1)

    def by_node(self):
        """``{node: discord per sample}``, ``1/2 ||residual||^2`` of each node's edge (and of ``"yhat"``)."""
        return dict(zip(self.edge_names, self.by_edge().T))

    def by_channel(self, name):
        """Discord of node ``name``'s edge per sample and channel, ``(n_samples, C)``.

        The channel axis is the first of the node's shape (``(C, L)`` or ``(C, H, W)``); a flat node's
        channels are its coordinates.
        """
        r = self[name]
        shape = self.shape(name)
        per_channel = r.reshape(r.shape[0], shape[0], -1)
        return 0.5 * np.einsum("mcp,mcp->mc", per_channel, per_channel)

    def selected(self, name):
        """The coordinates pattern node ``name`` selects, ``(n_samples, size)`` bool.

        ``relu``/``leaky_relu``: its active mask (over its own coordinates, which are its parent's);
        ``maxpool``: the entries of its parent that some window's maximum selects.
        """
        op = self._pattern_op(name)
        rows = self.pattern[name]
        if op != "maxpool":
            return rows.copy()
        parent = self.graph.node(name).inputs[0]
        mask = np.zeros((rows.shape[0], self.graph.sizes[parent]), dtype=bool)
        np.put_along_axis(mask, rows, True, axis=1)
        return mask

    def split(self, name, edge=None):
        """``(selected, unselected)`` residuals of ``edge`` as flat arrays, split by pattern node ``name``.

        ``edge`` defaults to ``name`` itself for ``relu``/``leaky_relu`` (active, inactive) and to its parent
        for ``maxpool`` (selected, unselected entries); it may be ``name`` or its parent when their sizes
        match :meth:`selected`.
        """
        r, mask = self._split_edge(name, edge)
        return r[mask], r[~mask]

    def split_discord(self, name, edge=None):
        """Discord ``1/2 ||r||^2`` of the selected and the unselected coordinates of :meth:`split`, ``(n_samples, 2)``."""
        r, mask = self._split_edge(name, edge)
        sq = 0.5 * r * r
        return np.stack([np.where(mask, sq, 0.0).sum(axis=1), np.where(mask, 0.0, sq).sum(axis=1)], axis=1)

    def _pattern_op(self, name):
        self._index(name)
        if name not in self.pattern:
            raise ValueError(f"node {name!r} has no activation pattern; pattern nodes (relu, leaky_relu, maxpool): "
                             f"{', '.join(self.pattern) or 'none'}")
        return self.graph.node(name).op

    def _split_edge(self, name, edge):
        mask = self.selected(name)
        node = self.graph.node(name)
        if edge is None:
            edge = node.inputs[0] if node.op == "maxpool" else name
        if edge not in (name, node.inputs[0]):
            raise ValueError(f"split of {name!r}: edge must be {name!r} or its parent {node.inputs[0]!r}, got {edge!r}")
        if edge not in self.edge_names:
            raise ValueError(f"split of {name!r}: its parent is the input {edge!r}, which has no edge")
        r = self[edge]
        if r.shape != mask.shape:
            raise ValueError(f"split of {name!r} ({node.op}) selects among {mask.shape[1]} coordinates; edge "
                             f"{edge!r} has {r.shape[1]}")
        return r, mask


def node_residuals(net, X, state, layout):
    """:class:`NodeResiduals` of the free cochains ``state`` (validated, ``(M, layout.n_free)``) of the inputs ``X``."""
    graph = layout.graph
    values = {node.name: state[:, layout.free(node.name)] for node in graph.nodes}
    res = GraphSheaf(graph).residuals(X, values)
    names = [node.name for node in graph.nodes]
    edges = [-res.edges[name] for name in names]
    if not layout.reduced:
        names.append(OUTPUT_EDGE)
        edges.append(-output_residual(graph.output, values[graph.output_node], state[:, layout.free("yhat")]))
    return NodeResiduals(names, edges, res.pattern, layout)
