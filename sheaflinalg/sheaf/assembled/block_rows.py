"""Block rows of the coboundary of one sample, in edge order: ``[(edge, [(coordinate block, block), ...])]``.

A block is a dense matrix or a 1-D diagonal.  Every network, a chain included, has one defining edge
per node (:func:`node_row`, :func:`graph_rows`; on a chain these are the paper's edges ``e_z1, e_a1,
..., e_y``), the rows that do not depend on the pattern built once per batch (:func:`static_rows`).
"""

import numpy as np


def node_row(node, graph, pattern=None):
    """The block row of node ``v``'s defining edge ``x_v - sum_u F_(u->v) x_u - diag(b_v) 1_v`` (one sample).

    ``[(parent, -F), ..., ("1>v", -b_v), (v, identity)]``, the identity as a 1-D
    diagonal; ``pattern`` is the node's own pattern for one sample (pattern nodes only).
    """
    entries = [(u, -F) for u, F in zip(node.inputs, node.rule.blocks(node, graph, pattern))]
    bias = node.rule.constant(node, graph, pattern)
    if bias is not None:
        entries.append((f"1>{node.name}", -bias))
    entries.append((node.name, identity_block(graph, node.name)))
    return entries


def identity_block(graph, name):
    """The diagonal block of vertex ``name``'s defining edge (its own coefficient, ``+1`` on every coordinate),
    as a 1-D diagonal: the one place it is written, read by the assembly and the structural certificate."""
    return np.ones(graph.sizes[name])


def graph_rows(graph, pattern_row, out_jacobian, reduced, static, split=None):
    """Block rows of a graph network's coboundary for one sample, in edge order.

    ``pattern_row`` is ``{node: pattern of this sample}``; ``static`` holds the
    rows of the pattern-independent nodes (:func:`static_rows`), shared by every
    sample so that their Gram products are computed once per batch; ``split``
    the rows replacing the hyperedges of ``skip_encoding="edges"``
    (:func:`~sheaflinalg.sheaf.skip_edges.encoding.split_static_rows`), shared likewise.
    """
    rows = []
    for node in graph.nodes:
        if split and node.name in split:
            rows += split[node.name]
        else:
            rows.append((f"e_{node.name}", static[node.name] if node.name in static
                         else node_row(node, graph, pattern_row[node.name])))
    if not reduced:
        out = graph.output_node
        rows.append(("e_y", [(out, -out_jacobian), ("yhat", identity_block(graph, out))]))
    return rows


def static_rows(graph):
    """``{node: block row}`` of every node whose restriction maps do not depend on the pattern."""
    return {node.name: node_row(node, graph) for node in graph.nodes if not node.rule.pattern_dependent}
