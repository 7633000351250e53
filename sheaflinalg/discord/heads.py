"""Discord per attention head: the edges of an attention block, grouped by the head axes of their values.

Attention ``softmax(Q K^T * alpha) V`` is three smooth nodes (the torch importer's
``F.scaled_dot_product_attention``, or the same written out): the scores ``matmul`` ``alpha Q K^T``, their
``softmax`` over the last axis (the keys), and the output ``matmul`` ``P V``.  Their values have the
per-sample shapes ``(*heads, T, T)``, ``(*heads, T, T)`` and ``(*heads, T, d)``: the leading axes (one per
head axis, e.g. ``(H,)``; none for one head) index the heads, and every head's entries are its own.  The
discord of a head on an edge is ``1/2 ||r_h||^2`` over the head's entries of the edge's residual, so the
heads' discords add up to the edge's.

:func:`attention_blocks` finds the blocks of a graph (a softmax over the last axis whose parent is a
``matmul`` and which is the first factor of a ``matmul``); :func:`head_discord` groups a
:class:`~sheaflinalg.discord.node_residuals.NodeResiduals` by them
(:meth:`~sheaflinalg.discord.node_residuals.NodeResiduals.per_head`).
"""

import math
from dataclasses import dataclass

import numpy as np

from ..network.graph.graph import Graph
from ..network.graph.nodes import INPUT


@dataclass(frozen=True)
class AttentionBlock:
    """One attention block: its ``scores``, ``weights`` (softmax) and ``output`` nodes and its head count.

    ``name`` is the output node's (the block's value).  ``queries``, ``keys`` and ``values`` are the factors
    of the two products (``Q``, ``K^T`` as the scores' second factor, ``V``) where they are nodes whose
    leading axes are the heads too (None otherwise: the network's input, or a factor broadcast over the
    heads).
    """

    name: str
    scores: str
    weights: str
    output: str
    heads: int
    queries: str = None
    keys: str = None
    values: str = None

    @property
    def nodes(self):
        """The block's nodes in topological order."""
        return (self.scores, self.weights, self.output)

    @property
    def roles(self):
        """``{role: node}`` of every node whose value the heads split (``queries``, ``keys``, ``values``,
        ``scores``, ``weights``, ``output``; a factor that is None left out): the one grouping by head."""
        names = ("queries", "keys", "values", "scores", "weights", "output")
        return {role: getattr(self, role) for role in names if getattr(self, role) is not None}


def attention_blocks(graph):
    """Every attention block of ``graph`` (:class:`AttentionBlock`), in topological order.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> kt = sl.Node("kt", "permute", ["x"], {"axes": (0, 2, 1)})                    # x: (heads 2, T 3, d 4)
    >>> nodes = [kt, sl.Node("s", "matmul", ["x", "kt"], {"alpha": 0.5}),
    ...          sl.Node("p", "softmax", ["s"], {"axis": 2, "causal": False}),
    ...          sl.Node("o", "matmul", ["p", "x"], {"alpha": 1.0})]
    >>> [block] = attention_blocks(sl.Network.from_nodes((2, 3, 4), nodes).graph)
    >>> block.nodes, block.heads, block.keys, block.queries         # the queries and values are the input x
    (('s', 'p', 'o'), 2, 'kt', None)
    """
    graph = getattr(graph, "graph", graph)         # a Network's graph
    if not isinstance(graph, Graph):
        raise TypeError(f"attention_blocks takes a graph network (sl.Network or sl.Graph), got {type(graph).__name__}")
    blocks = []
    for node in graph.nodes:
        shape = graph.shapes[node.name]
        if node.op != "softmax" or node.attrs["axis"] != len(shape) - 1 or node.inputs[0] == INPUT:
            continue
        scores = graph.node(node.inputs[0])
        outputs = [child for child in graph.nodes if child.op == "matmul" and child.inputs[0] == node.name]
        if scores.op == "matmul" and len(shape) >= 2 and len(outputs) == 1:
            out = outputs[0].name
            factors = [_split_by_heads(graph, name, shape[:-2])
                       for name in (*scores.inputs, outputs[0].inputs[1])]
            blocks.append(AttentionBlock(out, scores.name, node.name, out, math.prod(shape[:-2]), *factors))
    return blocks


def _split_by_heads(graph, name, heads):
    """``name`` if it is a node whose value's leading axes are ``heads`` (the heads' shape), else None."""
    if name == INPUT or tuple(graph.shapes[name][:len(heads)]) != tuple(heads):
        return None
    return name


@dataclass
class HeadDiscord:
    """Discord of every attention block's edges per head (see the module).

    Attributes
    ----------
    blocks : list of AttentionBlock
    values : dict
        ``{block name: {node: (n_samples, heads)}}``: ``1/2 ||r_h||^2`` of the edge of each node the heads
        split (:attr:`AttentionBlock.roles`: the block's three and its factors).
    """

    blocks: list
    values: dict

    def by_block(self):
        """``{block name: (n_samples, heads)}``: the discord of each head over the block's three edges."""
        return {b.name: sum(self.values[b.name][name] for name in b.nodes) for b in self.blocks}

    def rows(self):
        """``[(block, head, discord)]``: the mean over the samples of each head's discord, block by block."""
        return [(name, h, float(d)) for name, per in self.by_block().items() for h, d in enumerate(per.mean(axis=0))]

    def table(self, digits=4):
        """The rows as text: block, head, discord ``1/2 ||r_h||^2`` (mean over the samples) and its share."""
        rows = self.rows()
        total = sum(d for _, _, d in rows)
        width = max([len("block")] + [len(name) for name, _, _ in rows]) + 2
        lines = [f"{'block':<{width}}{'head':>5}{'discord 1/2 ||r||^2':>22}{'share':>8}"]
        lines += [f"{name:<{width}}{h:>5}{d:>22.{digits}g}{(d / total if total > 0 else 0.0):>8.1%}"
                  for name, h, d in rows]
        return "\n".join(lines)


def head_discord(residuals):
    """:class:`HeadDiscord` of a :class:`~sheaflinalg.discord.node_residuals.NodeResiduals` (a ValueError if its
    graph has no attention block)."""
    blocks = attention_blocks(residuals.graph)
    if not blocks:
        raise ValueError("the network has no attention block (a softmax over the last axis between two matmul "
                         "nodes); per-axis discord of any node: NodeResiduals.by_axis")
    values = {b.name: {name: residuals.by_groups(name, b.heads) for name in b.roles.values()} for b in blocks}
    return HeadDiscord(blocks, values)
