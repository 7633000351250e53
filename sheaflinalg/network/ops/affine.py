"""``affine``: ``x_v = scale * x_u + shift`` elementwise, ``scale`` and ``shift`` broadcast to the node's shape.

The arrays follow numpy's (and PyTorch's) broadcasting over the per-sample axes, aligned on the last
axis: ``(C, 1, 1)`` is one value per channel of a ``(C, H, W)`` map (a layer scale), ``(D,)`` one per
feature of a ``(T, D)`` sequence (a LayerNorm's elementwise affine), ``(T, D)`` one per entry (a positional
embedding), ``(1,)`` one for all (``x * 0.5``, ``x / 8``, ``x + 1``).
"""

import numpy as np

from .rule import OpRule, entries_touched


def check_broadcast(node, parent):
    """Both parameters checked to broadcast to the parent's shape without enlarging it."""
    for key in ("scale", "shift"):
        value = node.params[key]
        ok = value.ndim <= len(parent) and all(m in (1, n) for m, n in zip(value.shape[::-1], parent[::-1]))
        if not ok or value.ndim == 0:
            raise ValueError(f"node {node.name!r} (affine): {key} of shape {value.shape} does not broadcast to "
                             f"the per-sample shape {parent} (at least one axis, aligned on the last)")


def broadcast(node, graph, key):
    """Parameter ``key`` broadcast over the node's stalk (a vector of its size)."""
    return np.broadcast_to(node.params[key], graph.shapes[node.name]).ravel()


def reduce_to(values, shape):
    """``values`` (samples, *stalk shape) summed over the samples and the axes ``shape`` broadcasts over."""
    lead = values.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + a for a, n in enumerate(shape) if n == 1 and values.shape[lead + a] != 1)
    return values.sum(axis=axes, keepdims=True).reshape(shape)


class Affine(OpRule):
    """The restriction map is ``diag(scale)`` broadcast over the stalk; ``shift`` goes through the ones block.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> node = sl.Node("s", "affine", ["x"], params={"scale": np.full((3, 1), 2.0), "shift": np.zeros(4)})
    >>> RULE.shape(node, [(3, 4)])
    (3, 4)
    """

    name = "affine"
    params = ("scale", "shift")
    has_bias = True
    work = staticmethod(entries_touched)

    def shape(self, node, parent_shapes):
        (parent,) = parent_shapes
        check_broadcast(node, parent)
        return parent

    def forward(self, node, graph):
        scale, shift = broadcast(node, graph, "scale"), broadcast(node, graph, "shift")

        def step(inputs, out, pattern, frozen):
            np.multiply(inputs[0], scale, out=out)
            out += shift
        return step

    def blocks(self, node, graph, pattern=None):
        return [broadcast(node, graph, "scale")]

    def maps(self, node, graph):
        scale = broadcast(node, graph, "scale")[None, :]
        return (lambda i, x, p: x * scale), (lambda i, y, p: y * scale)

    def prepare(self, node, pattern):
        return pattern

    def bias(self, node, graph):
        return broadcast(node, graph, "shift")

    def norm_bound(self, node, graph):
        return float(np.max(np.abs(node.params["scale"]), initial=0.0))

    def velocity(self, node, graph):
        shape = graph.shapes[node.name]
        scale, shift = node.params["scale"].shape, node.params["shift"].shape

        def velocity(x, e):
            e = e.reshape((e.shape[0],) + shape)
            return {"scale": reduce_to(e * x.reshape(e.shape), scale), "shift": reduce_to(e, shift)}
        return velocity

    def nnz(self, node, graph):
        size = graph.sizes[node.name]
        return 2 * size, size


RULE = Affine()
