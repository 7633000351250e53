"""``pad``: zero padding of the spatial axes (``F.pad`` with zeros, ``nn.ZeroPad2d``, ONNX ``Pad``)."""

import numbers

import numpy as np

from .rule import Placement, csr


def check_pads(node, parent):
    """``node.attrs['pads']`` as a tuple ``(before_1, after_1, ..., before_n, after_n)`` over the spatial axes."""
    pads, n = node.attrs["pads"], len(parent) - 1
    pads = (pads,) if isinstance(pads, numbers.Integral) else tuple(pads)
    if n < 1 or len(pads) != 2 * n or not all(isinstance(p, numbers.Integral) and not isinstance(p, bool)
                                              and p >= 0 for p in pads):
        raise ValueError(f"node {node.name!r} (pad): pads must be {2 * n} integers >= 0 (before and after each "
                         f"spatial axis of the channels-first shape {parent}), got {node.attrs['pads']!r}")
    return tuple(int(p) for p in pads)


def around_unpadded_axis(pairs):
    """``(order, pads)``: how zero padding ``pairs`` (before, after) of every per-sample axis, one of them not
    padded, is a pad node: ``order`` permutes the last unpadded axis first (None where the first axis is not
    padded: no permutation), ``pads`` the pad node's attribute in that order (the axes after the first).

    Examples
    --------
    >>> around_unpadded_axis([(0, 0), (1, 1), (0, 2)])
    (None, (1, 1, 0, 2))
    >>> around_unpadded_axis([(0, 6), (0, 6), (0, 0)])      # channels last: (H, W, C)
    ((2, 0, 1), (0, 6, 0, 6))
    """
    pairs = [tuple(pair) for pair in pairs]
    if pairs[0] == (0, 0):
        return None, tuple(p for pair in pairs[1:] for p in pair)
    free = max(k for k, pair in enumerate(pairs) if pair == (0, 0))
    order = (free,) + tuple(k for k in range(len(pairs)) if k != free)
    return order, tuple(p for k in order[1:] for p in pairs[k])


def destinations(node, graph):
    """For every parent entry, its position in the padded stalk."""
    parent, out = graph.shapes[node.inputs[0]], graph.shapes[node.name]
    pads = check_pads(node, parent)
    inside = (slice(None),) + tuple(slice(b, b + s) for b, s in zip(pads[::2], parent[1:]))
    return np.arange(int(np.prod(out))).reshape(out)[inside].ravel()


class Pad(Placement):
    """Every parent entry is placed inside a border of zeros: the restriction map is an injection.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> RULE.shape(sl.Node("p", "pad", ["x"], {"pads": (1, 0, 2, 2)}), [(3, 4, 5)])
    (3, 5, 9)
    """

    name = "pad"
    attrs = ("pads",)

    def shape(self, node, parent_shapes):
        (parent,) = parent_shapes
        pads = check_pads(node, parent)
        return (parent[0],) + tuple(s + b + a for s, b, a in zip(parent[1:], pads[::2], pads[1::2]))

    def forward(self, node, graph):
        dest = destinations(node, graph)

        def step(inputs, out, pattern, frozen):
            out[...] = 0.0
            out[:, dest] = inputs[0]
        return step

    def blocks(self, node, graph, pattern=None):
        dest = destinations(node, graph)
        return [csr(dest, np.arange(dest.size), np.ones(dest.size), (graph.sizes[node.name], dest.size))]

    def maps(self, node, graph):
        dest, size = destinations(node, graph), graph.sizes[node.name]

        def place(i, x, p):
            out = np.zeros((x.shape[0], size))
            out[:, dest] = x
            return out
        return place, (lambda i, y, p: y[:, dest])


RULE = Pad()
