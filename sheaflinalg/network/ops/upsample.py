"""``upsample``: nearest-neighbour upsampling by an integer factor per spatial axis (``nn.Upsample``,
``F.interpolate`` with mode ``"nearest"``)."""

import numbers

import numpy as np

from .rule import OpRule, csr, entries_touched


def check_scale(node, parent):
    """``node.attrs['scale']`` as a tuple of ints >= 1, one per spatial axis of the channels-first ``parent``."""
    scale, n = node.attrs["scale"], len(parent) - 1
    scale = (scale,) * max(n, 1) if isinstance(scale, numbers.Integral) else tuple(scale)
    if n < 1 or len(scale) != n or not all(isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= 1
                                           for s in scale):
        raise ValueError(f"node {node.name!r} (upsample): scale must be {max(n, 1)} integers >= 1 (one per spatial "
                         f"axis of the channels-first shape {parent}), got {node.attrs['scale']!r}")
    return tuple(int(s) for s in scale)


def sources(node, graph):
    """For every output entry, the position of the parent entry it copies."""
    parent = graph.shapes[node.inputs[0]]
    index = np.arange(int(np.prod(parent))).reshape(parent)
    for axis, s in enumerate(check_scale(node, parent), start=1):
        index = np.repeat(index, s, axis=axis)
    return index.ravel()


class Upsample(OpRule):
    """Output position ``(c, q)`` copies the parent's ``(c, q // scale)``: every column of the restriction map
    holds ``prod(scale)`` ones, so ``F^T F = prod(scale) I`` and ``||F||_2 = sqrt(prod(scale))`` exactly.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> RULE.shape(sl.Node("u", "upsample", ["x"], {"scale": (2, 3)}), [(4, 5, 6)])
    (4, 10, 18)
    """

    name = "upsample"
    attrs = ("scale",)

    def shape(self, node, parent_shapes):
        (parent,) = parent_shapes
        return (parent[0],) + tuple(n * s for n, s in zip(parent[1:], check_scale(node, parent)))

    def forward(self, node, graph):
        src = sources(node, graph)

        def step(inputs, out, pattern, frozen):
            np.take(inputs[0], src, axis=1, out=out)
        return step

    def blocks(self, node, graph, pattern=None):
        src = sources(node, graph)
        return [csr(np.arange(src.size), src, np.ones(src.size), (src.size, graph.sizes[node.inputs[0]]))]

    def maps(self, node, graph):
        parent = graph.shapes[node.inputs[0]]
        scale, src = check_scale(node, parent), sources(node, graph)
        split = (parent[0],) + tuple(v for n, s in zip(parent[1:], scale) for v in (n, s))
        summed = tuple(range(3, 2 * len(scale) + 2, 2))         # the scale axes of each block

        def transpose(i, y, p):
            return y.reshape((y.shape[0],) + split).sum(axis=summed).reshape(y.shape[0], -1)
        return (lambda i, x, p: x[:, src]), transpose

    def prepare(self, node, pattern):
        return pattern

    def bias(self, node, graph):
        return None

    def norm_bound(self, node, graph):
        return float(np.sqrt(np.prod(check_scale(node, graph.shapes[node.inputs[0]]))))

    def velocity(self, node, graph):
        return None

    def work(self, node, graph):
        return entries_touched(node, graph)

    def nnz(self, node, graph):
        return graph.sizes[node.name], graph.sizes[node.inputs[0]]


RULE = Upsample()
