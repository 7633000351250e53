"""Restriction maps of a graph network's defining edges, as sparse blocks built from index arithmetic.

Every computed node ``v`` has one defining edge
``x_v - sum over parents u of F_(u->v) x_u - diag(b_v) 1_v``.  This module
writes each ``F_(u->v)`` as a block (:mod:`sheaflinalg.sheaf.sparse_blocks`):
a dense matrix (``linear``), a 1-D diagonal (batch norm, ReLU/LeakyReLU
masks, addition, reshape) or a ``scipy.sparse`` CSR matrix built from the
window tables of :mod:`sheaflinalg.kernels.windows` (convolution, average
and adaptive pools, the max-pool selection, concatenation), never from a
dense matrix.  The bias ``b_v`` is a vector over the node's stalk (a
convolution's bias repeated over positions, a batch norm's shift likewise).
"""

import numpy as np
import scipy.sparse as sp

from ..kernels.windows import window_indices
from ..network.graph.forward import pool_windows
from ..network.graph.nodes import window_geometry


def _csr(rows, cols, vals, shape):
    out = sp.csr_matrix((np.asarray(vals, dtype=np.float64).ravel(), (rows.ravel(), cols.ravel())), shape=shape)
    out.sort_indices()
    return out


def conv_map(node, graph):
    """The convolution of ``node`` as a CSR matrix ``(out_channels * n_out, in_channels * n_in)`` (no bias)."""
    parent = graph.shapes[node.inputs[0]]
    W = node.params["weight"]
    spatial, kernel, stride, padding, dilation = window_geometry(node, parent)
    index, _ = window_indices(spatial, kernel, stride, padding, dilation)
    n_out, K = index.shape
    n_in = int(np.prod(spatial))
    cout, cin_g = W.shape[0], W.shape[1]
    per_group = cout // node.attrs["groups"]
    o = np.arange(cout)[:, None, None, None]
    p = np.arange(n_out)[None, :, None, None]
    c = (o // per_group) * cin_g + np.arange(cin_g)[None, None, :, None]    # global input channel
    pos = index[None, :, None, :]
    shape4 = (cout, n_out, cin_g, K)
    inside = np.broadcast_to(pos >= 0, shape4)
    rows = np.broadcast_to(o * n_out + p, shape4)[inside]
    cols = np.broadcast_to(c * n_in + pos, shape4)[inside]
    vals = np.broadcast_to(W.reshape(cout, 1, cin_g, K), shape4)[inside]
    return _csr(rows, cols, vals, (cout * n_out, parent[0] * n_in))


def pool_map(node, graph):
    """An average or adaptive average pool as a CSR matrix ``(channels * n_out, channels * n_in)``."""
    channels, n_in, index, divisor = pool_windows(node, graph)
    n_out = index.shape[0]
    c = np.arange(channels)[:, None, None]
    p = np.arange(n_out)[None, :, None]
    shape3 = (channels, n_out, index.shape[1])
    inside = np.broadcast_to(index[None] >= 0, shape3)
    rows = np.broadcast_to(c * n_out + p, shape3)[inside]
    cols = np.broadcast_to(c * n_in + index[None], shape3)[inside]
    vals = np.broadcast_to((1.0 / divisor)[None, :, None], shape3)[inside]
    return _csr(rows, cols, vals, (channels * n_out, channels * n_in))


def selection_map(argmax, n_in):
    """The max-pool selection of one sample: row ``o`` picks input ``argmax[o]`` (CSR ``(n_out, n_in)``)."""
    n_out = argmax.size
    return sp.csr_matrix((np.ones(n_out), argmax.astype(np.int64), np.arange(n_out + 1)), shape=(n_out, n_in))


def concat_maps(node, graph):
    """Selections placing every parent's stalk into the concatenation's rows: one CSR per parent."""
    shape = graph.shapes[node.name]
    rows = np.arange(graph.sizes[node.name]).reshape(shape)
    bounds = np.cumsum([graph.shapes[p][node.attrs["axis"]] for p in node.inputs])[:-1]
    maps = []
    for p, part in zip(node.inputs, np.split(rows, bounds, axis=node.attrs["axis"])):
        n = graph.sizes[p]
        maps.append(_csr(part.ravel(), np.arange(n), np.ones(n), (graph.sizes[node.name], n)))
    return maps


def _per_channel(node, graph, values):
    return np.repeat(values, graph.sizes[node.name] // values.size)


def node_bias(node, graph):
    """``b_v`` over the node's stalk (its ones block carries ``diag(b_v)``), or None for a node without bias."""
    if node.op == "linear":
        return node.params["bias"]
    if node.op == "conv":
        return _per_channel(node, graph, node.params["bias"])
    if node.op == "batchnorm":
        return _per_channel(node, graph, node.params["shift"])
    return None


def node_maps(node, graph, pattern=None):
    """``[(parent name, F_(parent->node)), ...]`` in the order of ``node.inputs``.

    ``pattern`` is this node's pattern for one sample (a 1-D bool mask or the
    int64 argmax positions) for pattern-dependent nodes, else ignored.
    """
    op, parents = node.op, node.inputs
    n = graph.sizes[node.name]
    if op == "linear":
        F = [node.params["weight"]]
    elif op == "conv":
        F = [conv_map(node, graph)]
    elif op in ("avgpool", "adaptive_avgpool"):
        F = [pool_map(node, graph)]
    elif op == "maxpool":
        F = [selection_map(pattern, graph.sizes[parents[0]])]
    elif op == "batchnorm":
        F = [_per_channel(node, graph, node.params["scale"])]
    elif op == "relu":
        F = [pattern.astype(np.float64)]
    elif op == "leaky_relu":
        F = [np.where(pattern, 1.0, float(node.attrs["negative_slope"]))]
    elif op in ("add", "reshape"):
        F = [np.ones(n) for _ in parents]
    elif op == "concat":
        F = concat_maps(node, graph)
    else:  # the op table and this function must agree
        raise ValueError(f"node {node.name!r}: no restriction map for operation {op!r}")
    return list(zip(parents, F))


def map_nnz(node, graph):
    """``(nnz, gram)``: stored entries of the node's restriction maps (bias included) and a bound on the
    entries of their Gram blocks ``F^T F`` (an input meets the inputs of the windows that read it)."""
    n = graph.sizes[node.name]
    parent = graph.shapes[node.inputs[0]]
    n_in = graph.sizes[node.inputs[0]]
    if node.op == "linear":
        nnz, gram = n * n_in, n_in * n_in
    elif node.op in ("conv", "avgpool", "maxpool"):
        kernel = window_geometry(node, parent)[1]
        reach = int(np.prod([2 * k - 1 for k in kernel]))
        if node.op == "conv":
            W = node.params["weight"]
            nnz, gram = n * int(np.prod(W.shape[1:])), n_in * W.shape[1] * reach
        else:
            nnz, gram = n * int(np.prod(kernel)), n_in * reach
    elif node.op == "adaptive_avgpool":
        K = pool_windows(node, graph)[2].shape[1]
        nnz, gram = n * K, n_in * K * 2 ** (len(parent) - 1)
    else:
        nnz = gram = sum(graph.sizes[p] for p in node.inputs)
    return nnz + (n if node.spec.has_bias else 0), gram
