"""The forward pass of a graph, node by node, with its activation pattern (or under a frozen one).

This is forward substitution in the graph's ``delta_Omega``: every node's value
is ``sum over parents of F_(u->v) x_u + b_v`` with the pattern-dependent maps
(ReLU masks, max-pool selections) fixed by the pattern.  With no pattern
given, each node's pattern is read off its own input (``z >= 0`` active, the
first maximum of each window) and the result is the network's forward pass.
"""

from dataclasses import dataclass

import numpy as np

from ...kernels.convolution import conv_forward, conv_geometry
from ...kernels.pooling import average_pool, max_pool
from ...kernels.windows import adaptive_windows, window_indices
from ..errors import NetworkOverflowError
from .nodes import INPUT, window_geometry


@dataclass
class GraphState:
    """Every node's value for a batch, and the pattern that produced them.

    Attributes
    ----------
    values : dict
        ``{name: ndarray (n_samples, stalk size)}``, the input ``"x"`` included (flattened, C order).
    pattern : dict
        ``{name: ndarray (n_samples, stalk size)}`` for each pattern-dependent node:
        bool masks (relu, leaky_relu: ``True`` = active) and int64 argmax positions in the
        parent's stalk (maxpool).
    self_consistent : ndarray of bool, shape (n_samples,)
        Whether a frozen pattern agrees with the values it produced (a pre-activation exactly 0
        agrees with either label, a tied maximum with any of its maxima).
    """

    values: dict
    pattern: dict
    self_consistent: np.ndarray


def _conv(node, graph, inputs):
    (x,) = inputs
    parent = graph.shapes[node.inputs[0]]
    spatial, kernel, stride, padding, dilation = window_geometry(node, parent)
    W = node.params["weight"]
    geom = conv_geometry(parent[0], spatial, W.shape[0], node.attrs["groups"], kernel, stride, padding, dilation)
    return conv_forward(x, W, node.params["bias"], geom)


def pool_windows(node, graph):
    """``(channels, n_in_positions, index, divisor)`` of a pooling node (divisor only for averages)."""
    parent = graph.shapes[node.inputs[0]]
    n_in = int(np.prod(parent[1:]))
    if node.op == "adaptive_avgpool":
        index, count = adaptive_windows(parent[1:], graph.shapes[node.name][1:])
        return parent[0], n_in, index, count.astype(np.float64)
    spatial, kernel, stride, padding, dilation = window_geometry(node, parent)
    index, _ = window_indices(spatial, kernel, stride, padding, dilation)
    divisor = None
    if node.op == "avgpool":
        divisor = (np.full(index.shape[0], float(index.shape[1])) if node.attrs["count_include_pad"]
                   else (index >= 0).sum(axis=1).astype(np.float64))
    return parent[0], n_in, index, divisor


def _pool(node, graph, inputs):
    channels, n_in, index, divisor = pool_windows(node, graph)
    return average_pool(inputs[0], channels, n_in, index, divisor)


def _batchnorm(node, graph, inputs):
    (x,) = inputs
    shape = graph.shapes[node.name]
    per = int(np.prod(shape[1:]))
    scale = np.repeat(node.params["scale"], per)
    shift = np.repeat(node.params["shift"], per)
    return x * scale + shift


def _concat(node, graph, inputs):
    axis = node.attrs["axis"]
    M = inputs[0].shape[0]
    parts = [x.reshape((M,) + graph.shapes[p]) for x, p in zip(inputs, node.inputs)]
    return np.ascontiguousarray(np.concatenate(parts, axis=axis + 1).reshape(M, -1))


def _add(node, graph, inputs):
    out = inputs[0].copy()
    for x in inputs[1:]:
        out += x
    return out


_LINEAR = {
    "linear": lambda node, graph, inputs: inputs[0] @ node.params["weight"].T + node.params["bias"],
    "conv": _conv,
    "avgpool": _pool,
    "adaptive_avgpool": _pool,
    "batchnorm": _batchnorm,
    "add": _add,
    "concat": _concat,
    "reshape": lambda node, graph, inputs: inputs[0].copy(),
}


def _masked(node, z, mask):
    if node.op == "relu":
        return z * mask
    return np.where(mask, z, node.attrs["negative_slope"] * z)


def _pattern_step(node, graph, inputs, frozen):
    """Value, pattern and per-sample consistency of a pattern-dependent node."""
    (z,) = inputs
    if node.op == "maxpool":
        channels, n_in, index, _ = pool_windows(node, graph)
        best, argmax = max_pool(z, channels, n_in, index)
        if frozen is None:
            return best, argmax, None
        chosen = np.take_along_axis(z, frozen, axis=1)
        return chosen, frozen, np.all(chosen == best, axis=1)
    active = z >= 0
    if frozen is None:
        return _masked(node, z, active), active, None
    return _masked(node, z, frozen), frozen, np.all((frozen == active) | (z == 0), axis=1)


def evaluate(graph, X, pattern=None):
    """Every node's value for the batch ``X`` (``(n_samples, n_inputs)``, checked by the caller).

    Parameters
    ----------
    graph : Graph
    X : ndarray, shape (n_samples, prod(input_shape))
    pattern : dict, optional
        Frozen pattern ``{node name: array}`` (checked by the caller); default: the forward pass's own.

    Returns
    -------
    GraphState

    Raises
    ------
    NetworkOverflowError
        A node's value is not finite (the message names the node).
    """
    values = {INPUT: X}
    used = {}
    consistent = np.ones(X.shape[0], dtype=bool)
    for node in graph.nodes:
        inputs = [values[p] for p in node.inputs]
        with np.errstate(over="ignore", invalid="ignore"):
            if node.spec.pattern_dependent:
                frozen = None if pattern is None else pattern[node.name]
                value, used[node.name], agrees = _pattern_step(node, graph, inputs, frozen)
                if agrees is not None:
                    consistent &= agrees
            else:
                value = _LINEAR[node.op](node, graph, inputs)
        if not np.all(np.isfinite(value)):
            s = int(np.argwhere(~np.isfinite(value))[0, 0])
            raise NetworkOverflowError(f"the forward pass overflows at node {node.name!r} ({node.op}): its value is "
                                       f"not finite for sample {s}; rescale the weights or the inputs")
        values[node.name] = value
    return GraphState(values=values, pattern=used, self_consistent=consistent)
