"""Restriction maps of a graph network's defining edges as sparse blocks, read from the op rules.

Every computed node ``v`` has one defining edge
``x_v - sum over parents u of F_(u->v) x_u - diag(b_v) 1_v``.  Each op's rule
(:mod:`sheaflinalg.network.ops`) writes its ``F_(u->v)`` as a block
(:mod:`sheaflinalg.sheaf.sparse_blocks`): a dense matrix, a 1-D diagonal or a
``scipy.sparse`` CSR matrix built from index arithmetic, never from a dense
matrix, and its constant ``b_v`` as a vector over the node's stalk.
"""


def node_bias(node, graph):
    """``b_v`` over the node's stalk (its ones block carries ``diag(b_v)``), or None for a node without bias.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> conv = sl.Node("c", "conv", ["x"], {"stride": 1, "padding": 0, "dilation": 1, "groups": 1},
    ...                {"weight": np.ones((2, 1, 2)), "bias": np.array([1.0, -1.0])})
    >>> node_bias(conv, sl.Network.from_nodes((1, 3), [conv]).graph).tolist()
    [1.0, 1.0, -1.0, -1.0]
    """
    return node.rule.bias(node, graph)


def node_maps(node, graph, pattern=None):
    """``[(parent name, F_(parent->node)), ...]`` in the order of ``node.inputs``.

    ``pattern`` is this node's pattern for one sample (a 1-D bool mask or the
    int64 argmax positions) for pattern-dependent nodes, else ignored.
    """
    return list(zip(node.inputs, node.rule.blocks(node, graph, pattern)))


def map_nnz(node, graph):
    """``(nnz, gram)``: stored entries of the node's restriction maps (bias included) and a bound on the
    entries of their Gram blocks ``F^T F`` (an input meets the inputs of the windows that read it)."""
    return node.rule.nnz(node, graph)
