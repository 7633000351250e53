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
from ..sheaf.matrix_free.residuals import GraphSheaf, output_residual
from ..sheaf.layout import Layout
from .heads import head_discord

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

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> conv = sl.Node("c", "conv", ["x"], {"stride": 1, "padding": 0, "dilation": 1, "groups": 1},
    ...                {"weight": np.ones((2, 1, 2)), "bias": np.array([0.0, -1.5])})
    >>> net = sl.Network.from_nodes((1, 3), [conv, sl.Node("r", "relu", ["c"])])
    >>> X = np.array([[1.0, 0.0, 2.0]])
    >>> state = sl.harmonic_extension(net, X).free
    >>> state[0, :2] += 1.0                       # move channel 0 of c off the forward pass
    >>> res = sl.discord.residuals(net, X, state)
    >>> res.edge_names, res.by_channel("c").tolist()
    (['c', 'r', 'yhat'], [[1.0, 0.0]])
    >>> res.selected("r").astype(int).tolist(), res.split_discord("r", edge="c").tolist()
    ([[1, 1, 0, 1]], [[1.0, 0.0]])
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
        return self.by_axis(name, 0)

    def by_axis(self, name, axis):
        """Discord of node ``name``'s edge per sample and index along ``axis`` of the node's value shape,
        ``(n_samples, shape[axis])``: ``1/2`` the sum of the squared residuals over the other axes.

        Examples
        --------
        >>> import numpy as np, sheaflinalg as sl
        >>> net = sl.Network.from_nodes((2, 3), [sl.Node("t", "tanh", ["x"])])
        >>> X = np.zeros((1, 6))
        >>> state = sl.harmonic_extension(net, X).free
        >>> state[0, [0, 1, 5]] += 1.0            # t[0, 0], t[0, 1], t[1, 2]
        >>> res = sl.discord.residuals(net, X, state)
        >>> res.by_axis("t", 0).tolist(), res.by_axis("t", -1).tolist()
        ([[1.0, 0.5]], [[0.5, 0.5, 0.5]])
        """
        shape = self.shape(name)
        if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool) or not -len(shape) <= axis < len(shape):
            raise ValueError(f"axis must be an integer in {-len(shape)}..{len(shape) - 1} (node {name!r} has shape "
                             f"{shape}), got {axis!r}")
        r = np.moveaxis(self[name].reshape((-1,) + tuple(shape)), int(axis) % len(shape) + 1, 1)
        return self._grouped(r, shape[axis])

    def by_groups(self, name, n_groups):
        """Discord of node ``name``'s edge per sample and group of ``size / n_groups`` consecutive entries
        (C order: the groups of the leading axes, e.g. the heads of an attention value), ``(n_samples, n_groups)``."""
        return self._grouped(self[name], n_groups)

    def per_head(self):
        """Discord of every attention block per head (:class:`~sheaflinalg.discord.heads.HeadDiscord`;
        :mod:`sheaflinalg.discord.heads`): ``res.per_head().table()`` prints block, head, discord."""
        return head_discord(self)

    @staticmethod
    def _grouped(r, n_groups):
        per = r.reshape(r.shape[0], n_groups, -1)
        return 0.5 * np.einsum("mcp,mcp->mc", per, per)

    def selected(self, name):
        """The coordinates pattern node ``name`` selects, ``(n_samples, size)`` bool.

        ``relu``/``leaky_relu``: its active mask (over its own coordinates, which are its parent's);
        ``maxpool``: the entries of its parent that some window's maximum selects.
        """
        node = self._pattern_node(name)
        return node.rule.selected(node, self.graph, self.pattern[name])

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

    def _pattern_node(self, name):
        self._index(name)
        if name not in self.pattern:
            raise ValueError(f"node {name!r} has no activation pattern; pattern nodes (piecewise-linear ops): "
                             f"{', '.join(self.pattern) or 'none'}")
        return self.graph.node(name)

    def _split_edge(self, name, edge):
        mask = self.selected(name)
        node = self.graph.node(name)
        if edge is None:
            edge = node.rule.split_edge(node)
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


def node_table(res, digits=4, convention="paper"):
    """Rows of the per-node table: node, op, shape, discord (mean over the samples), share, split.

    ``convention="paper"`` reports ``||residual||^2``, ``"energy"`` ``1/2 ||residual||^2``
    (:meth:`~sheaflinalg.discord.PinnedDiscord.summary`).  The split of a ``relu``/``leaky_relu`` node is
    the discord of its edge on its active and inactive coordinates; of a ``maxpool`` node, the discord of
    its parent's edge on the selected and unselected entries.
    """
    scale = 2.0 if convention == "paper" else 1.0
    mean = scale * res.by_edge().mean(axis=0)
    total = float(mean.sum())
    ops = ["output" if name == OUTPUT_EDGE else res.graph.node(name).op for name in res.edge_names]
    shapes = ["x".join(map(str, res.shape(name))) for name in res.edge_names]
    w_name, w_op, w_shape = (max(len(t) for t in column) + 2 for column in (res.edge_names + ["Total"], ops, shapes))
    head = "||r||^2" if convention == "paper" else "1/2 ||r||^2"
    rows = [f"{'node':<{w_name}}{'op':<{w_op}}{'shape':<{w_shape}}{'discord ' + head:>20}{'share':>8}  split"]
    for j, name in enumerate(res.edge_names):
        share = mean[j] / total if total > 0 else 0.0
        rows.append(f"{name:<{w_name}}{ops[j]:<{w_op}}{shapes[j]:<{w_shape}}{mean[j]:>20.{digits}g}{share:>8.1%}  "
                    f"{_split_text(res, name, scale, digits)}".rstrip())
    rows.append(f"{'Total':<{w_name + w_op + w_shape}}{total:>20.{digits}g}")
    return rows


def _split_text(res, name, scale, digits):
    if name not in res.pattern:
        return ""
    node = res.graph.node(name)
    edge = node.rule.split_edge(node)
    if edge not in res.edge_names:
        return ""                    # a selection on the input: the input has no edge
    on, off = scale * res.split_discord(name).mean(axis=0)
    if edge != name:
        return f"selected {on:.{digits}g} / unselected {off:.{digits}g} (of {edge})"
    return f"active {on:.{digits}g} / inactive {off:.{digits}g}"
